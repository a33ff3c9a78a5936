"""Write the tiny landmark training-set fixtures of tests/data/gld in the
official layouts.

Run once (``python tests/data/make_gld_fixtures.py``); the files are committed.
Images are the coloured digits of make_fixtures.py, resized to sizes whose
aspect ratios h / w fall into the five groups of group-size sampling (bins
0.67, 0.77, 1.33, 1.5), so the sampler and GroupResize can be tested on a
real dataset.

- ``gldv2/``: ``train_clean.csv`` (3 landmarks, 14 images) and
  ``train/<id[0]>/<id[1]>/<id[2]>/<id>.jpg``.
- ``gldv1/``: ``train.csv`` (quoted ``"id","url","landmark_id"``, as the
  Kaggle 2018 file) and ``train/<id>.jpg``; the last row's image is missing
  (a dead URL).
- ``nc_clean/``: ``annotation_clean_train.txt`` / ``annotation_clean_val.txt``
  (``<url> <label>`` lines) and ``images/<url file name>``; one train image
  is missing.
"""
import hashlib
import os
import os.path as osp
import shutil

import cv2

from make_fixtures import make_image, write_text

HERE = osp.join(osp.dirname(osp.abspath(__file__)), 'gld')
# (width, height) per aspect group: h / w = 0.625, 0.72, 1.0, 1.375, 1.6.
GROUP_SHAPES = [(32, 20), (32, 23), (24, 24), (24, 33), (20, 32)]


def image_id(name: str) -> str:
    """A 16-hex id like the GLD ones, stable for ``name``."""
    return hashlib.md5(name.encode()).hexdigest()[:16]


def write_jpg(path: str, class_index: int, k: int, group: int) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    img = cv2.resize(make_image(class_index, k), GROUP_SHAPES[group],
                     interpolation=cv2.INTER_LINEAR)
    if not cv2.imwrite(path, img, [cv2.IMWRITE_JPEG_QUALITY, 90]):
        raise OSError(f'could not write {path}')


def make_gldv2(root: str) -> None:
    # landmark_id -> aspect group of each of its images (14 images, groups 3/3/3/2/3)
    landmarks = {4: [0, 1, 2, 2, 3], 17: [0, 1, 4, 4], 1032: [0, 1, 2, 3, 4]}
    rows = ['landmark_id,images']
    for c, (landmark, groups) in enumerate(sorted(landmarks.items())):
        ids = [image_id(f'gldv2-{landmark}-{k}') for k in range(len(groups))]
        for k, (i, g) in enumerate(zip(ids, groups)):
            write_jpg(osp.join(root, 'train', i[0], i[1], i[2], f'{i}.jpg'), c, k, g)
        rows.append(f'{landmark},{" ".join(ids)}')
    write_text(osp.join(root, 'train_clean.csv'), rows)


def make_gldv1(root: str) -> None:
    rows = ['"id","url","landmark_id"']
    entries = [(7, 0), (7, 2), (7, 4), (12, 1), (12, 2), (3, 3), (3, 0), (12, 2)]
    for k, (landmark, group) in enumerate(entries):
        i = image_id(f'gldv1-{k}')
        rows.append(f'"{i}","https://lh3.googleusercontent.com/-{i}/s1600/","{landmark}"')
        if k < len(entries) - 1:  # the last URL is dead: no image
            write_jpg(osp.join(root, 'train', f'{i}.jpg'), landmark, k, group)
    write_text(osp.join(root, 'train.csv'), rows)


def make_nc_clean(root: str) -> None:
    splits = {
        'train': [('colosseum', 0), ('colosseum', 2), ('big_ben', 4), ('big_ben', 3),
                  ('louvre', 1), ('louvre', 2)],
        'val': [('colosseum', 2), ('louvre', 0)],
    }
    for split, entries in splits.items():
        lines = []
        for k, (label, group) in enumerate(entries):
            name = f'{image_id(f"nc-{split}-{k}")}.jpg'
            lines.append(f'http://static.panoramio.com/photos/original/{name} {label}')
            if (split, k) != ('train', 5):  # one dead link
                write_jpg(osp.join(root, 'images', name), sum(map(ord, label)) % 10, k, group)
        write_text(osp.join(root, f'annotation_clean_{split}.txt'), lines)


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    for name, make in [('gldv2', make_gldv2), ('gldv1', make_gldv1), ('nc_clean', make_nc_clean)]:
        make(osp.join(HERE, name))


if __name__ == '__main__':
    main()
