"""Write the tiny dataset fixtures of tests/data in the official layouts.

Run once (``python tests/data/make_fixtures.py``); the images are committed.
Every image is a real 16 x 16 handwritten digit (scikit-learn's digits,
upscaled) tinted with a colour of its class, so that classes differ and a
model can learn something. Every split has 5 classes with >= 2 images each
(M-per-class sampling with m = 2 and 4 classes per batch works), and
query/gallery splits have >= 1 query and >= 1 gallery image per class.
"""
import os
import os.path as osp
import shutil

import cv2
import numpy as np
from sklearn.datasets import load_digits

HERE = osp.dirname(osp.abspath(__file__))
SIZE = 16
_DIGITS = load_digits()


def make_image(class_index: int, image_index: int) -> np.ndarray:
    """A 16 x 16 x 3 uint8 BGR image: digit ``class_index % 10`` (its
    ``image_index``-th sample) in a class-dependent colour."""
    digit = class_index % 10
    samples = np.flatnonzero(_DIGITS.target == digit)
    gray = _DIGITS.images[samples[(image_index + 7 * (class_index // 10)) % len(samples)]]
    gray = cv2.resize(gray.astype(np.float32) / 16.0, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR)
    tint = np.array([(37 * class_index) % 256, (91 * class_index + 60) % 256,
                     (151 * class_index + 120) % 256], dtype=np.float32)
    background = 255.0 - tint
    img = gray[..., None] * tint + (1.0 - gray[..., None]) * background
    return np.clip(img, 0, 255).astype(np.uint8)


def write_image(path: str, class_index: int, image_index: int) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    if path.lower().endswith(('.jpg', '.jpeg')):
        params = [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_OPTIMIZE, 1]
    else:
        params = [cv2.IMWRITE_PNG_COMPRESSION, 9]
    if not cv2.imwrite(path, make_image(class_index, image_index), params):
        raise OSError(f'could not write {path}')


def write_text(path: str, lines) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')


def make_sop(root: str) -> None:
    # (class_id, super_class_id, super-class folder, product id, number of images)
    super_names = {1: 'bicycle', 2: 'cabinet', 3: 'chair', 4: 'coffee_maker'}
    splits = {
        'train': [(1, 1, 111085122871, 3), (2, 1, 111265328556, 2), (3, 2, 111446121810, 3),
                  (4, 2, 111601578924, 2), (5, 2, 111725478963, 4)],
        'test': [(6, 3, 110796424553, 2), (7, 3, 111015478451, 3), (8, 4, 111204653871, 2),
                 (9, 4, 111358921450, 3), (10, 4, 111474585321, 2)],
    }
    image_id = 1
    for split, classes in splits.items():
        lines = ['image_id class_id super_class_id path']
        for class_id, super_id, product, count in classes:
            for k in range(count):
                rel = f'{super_names[super_id]}_final/{product}_{k}.JPG'
                write_image(osp.join(root, rel), class_id, k)
                lines.append(f'{image_id} {class_id} {super_id} {rel}')
                image_id += 1
        write_text(osp.join(root, f'Ebay_{split}.txt'), lines)


def make_cub(root: str) -> None:
    classes = [(1, 'Black_footed_Albatross', 3), (2, 'Laysan_Albatross', 2),
               (3, 'Sooty_Albatross', 2), (4, 'Groove_billed_Ani', 3), (5, 'Crested_Auklet', 2),
               (101, 'White_Pelican', 2), (102, 'Western_Wood_Pewee', 3), (103, 'Sayornis', 2),
               (104, 'American_Pipit', 2), (105, 'Whip_poor_Will', 3)]
    images, labels = [], []
    image_id = 1
    for class_id, name, count in classes:
        for k in range(count):
            rel = f'{class_id:03d}.{name}/{name}_{k + 1:04d}_{100 + image_id}.jpg'
            write_image(osp.join(root, 'images', rel), class_id, k)
            images.append(f'{image_id} {rel}')
            labels.append(f'{image_id} {class_id}')
            image_id += 1
    write_text(osp.join(root, 'images.txt'), images)
    write_text(osp.join(root, 'image_class_labels.txt'), labels)


def make_inshop(root: str) -> None:
    # (item number, folder, statuses of its images in order)
    items = [
        (2, 'WOMEN/Dresses', ['train', 'train', 'train']),
        (3, 'WOMEN/Blouses_Shirts', ['query', 'gallery']),
        (5, 'MEN/Denim', ['train', 'train']),
        (7, 'MEN/Tees_Tanks', ['query', 'query', 'gallery']),
        (8, 'WOMEN/Skirts', ['train', 'train']),
        (12, 'WOMEN/Dresses', ['query', 'gallery', 'gallery']),
        (13, 'MEN/Jackets_Vests', ['train', 'train', 'train']),
        (15, 'WOMEN/Tees_Tanks', ['query', 'gallery']),
        (21, 'MEN/Shirts_Polos', ['train', 'train']),
        (22, 'WOMEN/Denim', ['query', 'gallery']),
    ]
    views = ['front', 'side', 'back', 'full', 'additional']
    entries = []
    for number, folder, statuses in items:
        item_id = f'id_{number:08d}'
        for k, status in enumerate(statuses):
            rel = f'img/{folder}/{item_id}/{k + 1:02d}_{k + 1}_{views[k]}.jpg'
            write_image(osp.join(root, 'Img', rel), number, k)
            entries.append(f'{rel:<60}{item_id:<16}{status}')
    write_text(osp.join(root, 'Eval', 'list_eval_partition.txt'),
               [str(len(entries)), 'image_name item_id evaluation_status'] + entries)


def make_folder(root: str) -> None:
    splits = {'train': [('ant', 3), ('bee', 2), ('cat', 2), ('dog', 3), ('elk', 2)],
              'test': [('fox', 2), ('gnu', 3), ('hen', 2), ('ibis', 2), ('jay', 3)]}
    class_index = 0
    for split, classes in splits.items():
        for name, count in classes:
            for k in range(count):
                ext = '.jpg' if k == 1 else '.png'  # both kinds of file in a class
                write_image(osp.join(root, split, name, f'{name}_{k}{ext}'), class_index, k)
            class_index += 1


def make_csv(root: str) -> None:
    rows = ['path,label,split,is_query']
    train = [('kiwi', 2), ('lynx', 3), ('mole', 2), ('newt', 2), ('orca', 3)]
    test = [('puma', ['true', 'false']), ('quail', ['true', 'false', 'false']),
            ('rook', ['false', 'true']), ('seal', ['true', 'true', 'false']),
            ('toad', ['true', 'false'])]
    class_index = 20
    for name, count in train:
        for k in range(count):
            rel = f'images/{name}_{k}.png'
            write_image(osp.join(root, rel), class_index, k)
            rows.append(f'{rel},{name},train,')
        class_index += 1
    for name, flags in test:
        for k, flag in enumerate(flags):
            rel = f'images/{name}_{k}.png'
            write_image(osp.join(root, rel), class_index, k)
            rows.append(f'{rel},{name},test,{flag}')
        class_index += 1
    write_text(osp.join(root, 'annotations.csv'), rows)
    # Gallery images to ignore per query (CSVDataset's junk_file).
    write_text(osp.join(root, 'junk.csv'), [
        'query_path,gallery_path', 'images/quail_0.png,images/quail_2.png',
        'images/seal_0.png,images/rook_0.png', 'images/seal_1.png,images/seal_2.png',
        'images/kiwi_0.png,images/kiwi_1.png'])


def main() -> None:
    for name, make in [('sop', make_sop), ('cub', make_cub), ('inshop', make_inshop),
                       ('folder', make_folder), ('csv', make_csv)]:
        root = osp.join(HERE, name)
        shutil.rmtree(root, ignore_errors=True)
        make(root)


if __name__ == '__main__':
    main()
