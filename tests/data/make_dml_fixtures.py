"""Write the tiny fixtures of the recipe-benchmark datasets in their official
layouts: tests/data/cars196 and tests/data/inat2018.

Run once (``python tests/data/make_dml_fixtures.py``); the files are committed.
Images are the coloured digits of make_fixtures.py.

- ``cars196/``: the devkit ``cars_annos.mat`` (struct array ``annotations``
  with ``relative_im_path``, ``bbox_x1``, ``bbox_y1``, ``bbox_x2``,
  ``bbox_y2``, ``class``, ``test``, and the cell array ``class_names``, as
  ``scipy.io.loadmat`` reads the real file) with images ``car_ims/%06d.jpg``,
  and the same images in the csv mirror's layout: ``anno_train.csv`` /
  ``anno_test.csv`` (``file,x1,y1,x2,y2,class``, no header; the official
  classification split given by the ``test`` flag) with images
  ``cars_train/%05d.jpg`` / ``cars_test/%05d.jpg``. Classes 1..5 (retrieval
  train) and 99..103 (retrieval test), every class in both official splits.
- ``inat2018/``: ``Inaturalist_train_set1.txt`` / ``Inaturalist_test_set1.txt``
  (one ``train_val2018/<super-category>/<category id>/<hash>.jpg`` per line),
  5 disjoint categories each.
"""
import hashlib
import os
import os.path as osp
import shutil

import numpy as np
import scipy.io

from make_fixtures import write_image, write_text

HERE = osp.dirname(osp.abspath(__file__))
NUM_CARS_CLASSES = 196
# (class id, number of images); the i-th image of a class is in the official test split when i is odd
CARS_CLASSES = [(1, 3), (2, 2), (3, 4), (4, 2), (5, 3), (99, 2), (100, 3), (101, 2), (102, 4),
                (103, 2)]
# split -> [(super-category, category id, number of images)]
INAT_CLASSES = {
    'train': [('Plantae', 7477, 3), ('Plantae', 5122, 2), ('Aves', 3011, 2), ('Insecta', 1204, 3),
              ('Fungi', 6623, 2)],
    'test': [('Plantae', 7480, 2), ('Aves', 2979, 3), ('Aves', 3012, 2), ('Mammalia', 4450, 2),
             ('Reptilia', 4999, 3)],
}


def car_bbox(index: int):
    """A deterministic 1-based inclusive box inside the 16 x 16 image."""
    return 1 + index % 3, 2 + index % 2, 14 + index % 3, 13 + index % 4


def make_cars(root: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    fields = ['relative_im_path', 'bbox_x1', 'bbox_y1', 'bbox_x2', 'bbox_y2', 'class', 'test']
    rows = [(class_id, k) for class_id, count in CARS_CLASSES for k in range(count)]
    annotations = np.zeros((1, len(rows)), dtype=[(f, 'O') for f in fields])
    csv_lines = {0: [], 1: []}
    csv_counts = {0: 0, 1: 0}
    for i, (class_id, k) in enumerate(rows):
        is_test = k % 2
        rel = f'car_ims/{i + 1:06d}.jpg'
        x1, y1, x2, y2 = car_bbox(i)
        write_image(osp.join(root, rel), class_id, k)
        # loadmat gives a 1-element string array and 1 x 1 integer arrays for these fields
        annotations[0, i] = (np.array([rel]), np.array([[x1]], np.uint8), np.array([[y1]], np.uint8),
                             np.array([[x2]], np.uint8), np.array([[y2]], np.uint8),
                             np.array([[class_id]], np.uint8), np.array([[is_test]], np.uint8))
        csv_counts[is_test] += 1
        name = f'{csv_counts[is_test]:05d}.jpg'
        write_image(osp.join(root, 'cars_test' if is_test else 'cars_train', name), class_id, k)
        csv_lines[is_test].append(f'{name},{x1},{y1},{x2},{y2},{class_id}')
    class_names = np.empty((1, NUM_CARS_CLASSES), dtype=object)
    for c in range(NUM_CARS_CLASSES):
        class_names[0, c] = np.array([f'Make Model {c + 1} 2012'])
    scipy.io.savemat(osp.join(root, 'cars_annos.mat'),
                     dict(annotations=annotations, class_names=class_names))
    write_text(osp.join(root, 'anno_train.csv'), csv_lines[0])
    write_text(osp.join(root, 'anno_test.csv'), csv_lines[1])


def make_inat(root: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for split, classes in INAT_CLASSES.items():
        lines = []
        for super_name, category, count in classes:
            for k in range(count):
                name = hashlib.md5(f'{category}-{k}'.encode()).hexdigest()
                rel = f'train_val2018/{super_name}/{category}/{name}.jpg'
                write_image(osp.join(root, rel), category, k)
                lines.append(rel)
        write_text(osp.join(root, f'Inaturalist_{split}_set1.txt'), lines)


def main() -> None:
    make_cars(osp.join(HERE, 'cars196'))
    make_inat(osp.join(HERE, 'inat2018'))


if __name__ == '__main__':
    os.chdir(HERE)
    main()
