"""Miniatures of the generic formats for a user's own data: a folder per class
(FolderDataset) and a CSV list (CSVDataset).

Their classes are names, so ``image_fn(class_index, image_index)`` gets the
class's position in the plan, counted on across the splits.
"""
import os.path as osp
from typing import Optional, Sequence, Tuple

from irtbox.utils.checks import check_int
from .common import ImageFn, write_image, write_text

__all__ = ['CSV_ANN_FILE', 'CSV_JUNK_FILE', 'write_csv', 'write_folder']

CSV_ANN_FILE, CSV_JUNK_FILE = 'annotations.csv', 'junk.csv'


def _class_names(classes: int) -> dict:
    """``{split: [class name]}``: ``classes`` names for ``train`` and as many others for
    ``test``."""
    check_int(classes, 'classes')
    return {split: [f'class_{c:03d}' for c in range(s * classes, (s + 1) * classes)]
            for s, split in enumerate(('train', 'test'))}


def write_folder(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                 plan: Optional[dict] = None) -> None:
    """``<split>/<class name>/<class name>_<k>.png``; the second image of every
    class is a ``.jpg``, so that both decoders and suffixes are met.

    ``plan``: ``{split: [(class name, number of images)]}``. Default: ``classes``
    classes in ``train`` and ``classes`` others in ``test``.
    """
    if plan is None:
        check_int(per_class, 'per_class')
        plan = {split: [(name, per_class) for name in names]
                for split, names in _class_names(classes).items()}
    class_index = 0
    for split, rows in plan.items():
        for name, count in rows:
            for k in range(count):
                ext = '.jpg' if k == 1 else '.png'
                write_image(osp.join(root, split, name, f'{name}_{k}{ext}'),
                            image_fn(class_index, k))
            class_index += 1


def write_csv(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
              plan: Optional[dict] = None, junk: Sequence[Tuple[str, str]] = ()) -> None:
    """``annotations.csv`` (``path,label,split,is_query``), images
    ``images/<label>_<k>.png``, and ``junk.csv`` (``query_path,gallery_path``,
    the pairs ``junk``, written as the ``path`` column).

    ``plan``: ``{split: [(label, [is_query of each image])]}``, an ``is_query``
    being True, False or None (left blank). Default: ``classes`` labels in
    ``train`` (blank ``is_query``), ``classes`` others in ``test`` whose first
    half of images are queries and the rest gallery (``per_class`` >= 2, so
    both).
    """
    if plan is None:
        check_int(per_class, 'per_class', 2)
        queries = per_class // 2
        flags = {'train': [None] * per_class,
                 'test': [True] * queries + [False] * (per_class - queries)}
        plan = {split: [(name, flags[split]) for name in names]
                for split, names in _class_names(classes).items()}
    rows = ['path,label,split,is_query']
    class_index = 0
    for split, labels in plan.items():
        for label, is_query in labels:
            for k, flag in enumerate(is_query):
                rel = f'images/{label}_{k}.png'
                write_image(osp.join(root, rel), image_fn(class_index, k))
                rows.append(f'{rel},{label},{split},{"" if flag is None else str(flag).lower()}')
            class_index += 1
    write_text(osp.join(root, CSV_ANN_FILE), rows)
    write_text(osp.join(root, CSV_JUNK_FILE),
               ['query_path,gallery_path', *(f'{q},{g}' for q, g in junk)])
