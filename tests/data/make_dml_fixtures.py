"""Write the tiny fixtures of the recipe-benchmark datasets in their official
layouts, through irtbox's miniature writers (``irtbox.ops.miniature``):
tests/data/cars196 and tests/data/inat2018.

Run once (``python tests/data/make_dml_fixtures.py``); the files are committed.
Images are the coloured digits of make_fixtures.py.

- ``cars196/``: the devkit ``cars_annos.mat`` with images ``car_ims/%06d.jpg``,
  and the same images in the csv mirror's layout (``anno_train.csv`` /
  ``anno_test.csv``, ``cars_train/`` / ``cars_test/``). Classes 1..5
  (retrieval train) and 99..103 (retrieval test), every class in both
  official splits.
- ``inat2018/``: ``Inaturalist_train_set1.txt`` / ``Inaturalist_test_set1.txt``
  (one ``train_val2018/<super-category>/<category id>/<hash>.jpg`` per line),
  5 disjoint categories each.
"""
import os.path as osp
import shutil

from make_fixtures import make_image

from irtbox.ops.miniature import write_miniature

HERE = osp.dirname(osp.abspath(__file__))
# [(class id, number of images)]
CARS_PLAN = [(1, 3), (2, 2), (3, 4), (4, 2), (5, 3), (99, 2), (100, 3), (101, 2), (102, 4),
             (103, 2)]
# {split: [(super-category, category id, number of images)]}
INAT_PLAN = {
    'train': [('Plantae', 7477, 3), ('Plantae', 5122, 2), ('Aves', 3011, 2), ('Insecta', 1204, 3),
              ('Fungi', 6623, 2)],
    'test': [('Plantae', 7480, 2), ('Aves', 2979, 3), ('Aves', 3012, 2), ('Mammalia', 4450, 2),
             ('Reptilia', 4999, 3)],
}


def main() -> None:
    for name, plan in [('cars196', CARS_PLAN), ('inat2018', INAT_PLAN)]:
        root = osp.join(HERE, name)
        shutil.rmtree(root, ignore_errors=True)
        write_miniature(name, root, make_image, plan=plan)


if __name__ == '__main__':
    main()
