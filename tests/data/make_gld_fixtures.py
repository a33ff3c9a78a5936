"""Write the tiny landmark training-set fixtures of tests/data/gld in the
official layouts, through irtbox's miniature writers
(``irtbox.ops.miniature``).

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
import os.path as osp
import shutil

import cv2

from make_fixtures import make_image

from irtbox.ops.miniature import write_miniature

HERE = osp.join(osp.dirname(osp.abspath(__file__)), 'gld')
# (width, height) per aspect group: h / w = 0.625, 0.72, 1.0, 1.375, 1.6.
GROUP_SHAPES = [(32, 20), (32, 23), (24, 24), (24, 33), (20, 32)]
# landmark_id -> aspect group of each of its images (14 images, groups 3/3/3/2/3)
GLDV2_GROUPS = {4: [0, 1, 2, 2, 3], 17: [0, 1, 4, 4], 1032: [0, 1, 2, 3, 4]}
# (landmark_id, aspect group) of each row of train.csv; the last URL is dead
GLDV1_ROWS = [(7, 0), (7, 2), (7, 4), (12, 1), (12, 2), (3, 3), (3, 0), (12, 2)]
# {split: [(label, aspect group) of each line]}; train line 5 is a dead link
NC_ROWS = {
    'train': [('colosseum', 0), ('colosseum', 2), ('big_ben', 4), ('big_ben', 3),
              ('louvre', 1), ('louvre', 2)],
    'val': [('colosseum', 2), ('louvre', 0)],
}


def grouped_image(class_index: int, image_index: int, group: int):
    """The coloured digit resized to the size of aspect group ``group``."""
    return cv2.resize(make_image(class_index, image_index), GROUP_SHAPES[group],
                      interpolation=cv2.INTER_LINEAR)


def rows_by_image(rows):
    """{(label, k): (split, row number, group)} for rows ``(split, row number, label,
    group)``, k counting the rows of a label (the writers' image_index)."""
    count, found = {}, {}
    for split, row, label, group in rows:
        k = count[label] = count.get(label, -1) + 1
        found[label, k] = split, row, group
    return found


def make_gldv2(root: str) -> None:
    position = {landmark: c for c, landmark in enumerate(sorted(GLDV2_GROUPS))}

    def image_fn(landmark, k):
        return grouped_image(position[landmark], k, GLDV2_GROUPS[landmark][k])

    write_miniature('gldv2clean', root, image_fn,
                    plan=[(landmark, len(GLDV2_GROUPS[landmark])) for landmark in position])


def make_gldv1(root: str) -> None:
    found = rows_by_image(('train', row, landmark, group)
                          for row, (landmark, group) in enumerate(GLDV1_ROWS))

    def image_fn(landmark, k):
        _, row, group = found[landmark, k]
        return grouped_image(landmark, row, group)

    write_miniature('gldv1noisy', root, image_fn, plan=[landmark for landmark, _ in GLDV1_ROWS],
                    missing=[len(GLDV1_ROWS) - 1])


def make_nc_clean(root: str) -> None:
    found = rows_by_image((split, row, label, group) for split, rows in NC_ROWS.items()
                          for row, (label, group) in enumerate(rows))
    labels = list(dict.fromkeys(label for label, _ in found))  # the writer's class order

    def image_fn(class_index, k):
        label = labels[class_index]
        _, row, group = found[label, k]
        return grouped_image(sum(map(ord, label)) % 10, row, group)

    write_miniature('ncclean', root, image_fn,
                    plan={split: [label for label, _ in rows] for split, rows in NC_ROWS.items()},
                    missing=[('train', 5)])


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    for name, make in [('gldv2', make_gldv2), ('gldv1', make_gldv1), ('nc_clean', make_nc_clean)]:
        make(osp.join(HERE, name))


if __name__ == '__main__':
    main()
