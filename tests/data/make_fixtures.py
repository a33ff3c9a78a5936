"""Write the tiny dataset fixtures of tests/data in the official layouts, through
irtbox's miniature writers (``irtbox.ops.miniature``) with the plans below.

Run once (``python tests/data/make_fixtures.py``); the images are committed.
Every image is a real 16 x 16 handwritten digit (scikit-learn's digits,
upscaled) tinted with a colour of its class, so that classes differ and a
model can learn something. Every split has 5 classes with >= 2 images each
(M-per-class sampling with m = 2 and 4 classes per batch works), and
query/gallery splits have >= 1 query and >= 1 gallery image per class.
"""
import os.path as osp
import shutil

import cv2
import numpy as np
from sklearn.datasets import load_digits

from irtbox.ops.miniature import write_miniature

HERE = osp.dirname(osp.abspath(__file__))
SIZE = 16
_DIGITS = load_digits()

# {split: [(class_id, super_class_id, product, number of images)]}
SOP_PLAN = {
    'train': [(1, 1, 111085122871, 3), (2, 1, 111265328556, 2), (3, 2, 111446121810, 3),
              (4, 2, 111601578924, 2), (5, 2, 111725478963, 4)],
    'test': [(6, 3, 110796424553, 2), (7, 3, 111015478451, 3), (8, 4, 111204653871, 2),
             (9, 4, 111358921450, 3), (10, 4, 111474585321, 2)],
}
# [(class_id, name, number of images)]: classes 1-5 train, 101-105 test
CUB_PLAN = [(1, 'Black_footed_Albatross', 3), (2, 'Laysan_Albatross', 2),
            (3, 'Sooty_Albatross', 2), (4, 'Groove_billed_Ani', 3), (5, 'Crested_Auklet', 2),
            (101, 'White_Pelican', 2), (102, 'Western_Wood_Pewee', 3), (103, 'Sayornis', 2),
            (104, 'American_Pipit', 2), (105, 'Whip_poor_Will', 3)]
# [(item number, folder, statuses of its images in order)]
INSHOP_PLAN = [
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
# {split: [(class name, number of images)]}
FOLDER_PLAN = {'train': [('ant', 3), ('bee', 2), ('cat', 2), ('dog', 3), ('elk', 2)],
               'test': [('fox', 2), ('gnu', 3), ('hen', 2), ('ibis', 2), ('jay', 3)]}
# {split: [(label, is_query of each image)]}
CSV_PLAN = {
    'train': [('kiwi', [None] * 2), ('lynx', [None] * 3), ('mole', [None] * 2),
              ('newt', [None] * 2), ('orca', [None] * 3)],
    'test': [('puma', [True, False]), ('quail', [True, False, False]), ('rook', [False, True]),
             ('seal', [True, True, False]), ('toad', [True, False])],
}
# Gallery images to ignore per query (CSVDataset's junk_file).
CSV_JUNK = [('images/quail_0.png', 'images/quail_2.png'),
            ('images/seal_0.png', 'images/rook_0.png'),
            ('images/seal_1.png', 'images/seal_2.png'),
            ('images/kiwi_0.png', 'images/kiwi_1.png')]
CSV_FIRST_CLASS = 20  # the csv classes get other colours than the folder ones


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


def main() -> None:
    def csv_image(class_index, image_index):
        return make_image(CSV_FIRST_CLASS + class_index, image_index)

    for name, image_fn, options in [
            ('sop', make_image, dict(plan=SOP_PLAN)), ('cub', make_image, dict(plan=CUB_PLAN)),
            ('inshop', make_image, dict(plan=INSHOP_PLAN)),
            ('folder', make_image, dict(plan=FOLDER_PLAN)),
            ('csv', csv_image, dict(plan=CSV_PLAN, junk=CSV_JUNK))]:
        root = osp.join(HERE, name)
        shutil.rmtree(root, ignore_errors=True)
        write_miniature(name, root, image_fn, **options)


if __name__ == '__main__':
    main()
