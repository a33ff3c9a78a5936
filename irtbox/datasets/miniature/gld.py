"""Miniatures of the landmark training sets listed by image id or URL: GLDv2-clean,
GLDv1-noisy and NC-clean, each in its official layout.

``image_fn(class_index, image_index)`` gets the landmark id (GLD) or the
position of the label in order of first appearance (NC-clean, whose labels
are names), and the image's position among its class's rows, counted on
across the splits.
"""
import hashlib
import os.path as osp
from typing import Collection, Dict, Optional, Sequence, Tuple

from ..gldv2 import gld_image_path
from irtbox.utils.checks import check_int
from .common import ImageFn, write_image, write_text

__all__ = ['write_gldv1noisy', 'write_gldv2clean', 'write_ncclean']


def _image_id(text: str) -> str:
    """A 16-hex id like the GLD ones, stable for ``text``."""
    return hashlib.md5(text.encode()).hexdigest()[:16]


def _interleaved(labels: Sequence, per_class: int) -> list:
    """``per_class`` rows of every label, the classes taking turns (as in a shuffled list:
    nothing may rely on the rows of a class being together)."""
    check_int(per_class, 'per_class')
    return [label for _ in range(per_class) for label in labels]


def write_gldv2clean(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                     plan: Optional[list] = None) -> None:
    """``train_clean.csv`` (``landmark_id,images``, the ids space-separated) and
    ``train/<id[0]>/<id[1]>/<id[2]>/<id>.jpg``.

    ``plan``: ``[(landmark id, number of images)]``, one csv row each.
    Default: landmarks ``0 .. classes - 1``.
    """
    if plan is None:
        check_int(per_class, 'per_class')
        plan = [(c, per_class) for c in range(check_int(classes, 'classes'))]
    rows = ['landmark_id,images']
    for landmark, count in plan:
        ids = [_image_id(f'gldv2-{landmark}-{k}') for k in range(count)]
        for k, image_id in enumerate(ids):
            write_image(osp.join(root, 'train', gld_image_path(image_id)), image_fn(landmark, k))
        rows.append(f'{landmark},{" ".join(ids)}')
    write_text(osp.join(root, 'train_clean.csv'), rows)


def write_gldv1noisy(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                     plan: Optional[list] = None, missing: Collection[int] = ()) -> None:
    """``train.csv`` (quoted ``"id","url","landmark_id"``, as the Kaggle 2018
    file) and ``train/<id>.jpg``.

    ``plan``: the landmark id of each row, in file order. ``missing``: rows
    whose image is not written (dead URLs; configs read them with
    ``skip_missing=True``). Default: landmarks ``0 .. classes - 1``, their
    rows interleaved.
    """
    if plan is None:
        plan = _interleaved(range(check_int(classes, 'classes')), per_class)
    rows, seen = ['"id","url","landmark_id"'], {}
    for row, landmark in enumerate(plan):
        image_id = _image_id(f'gldv1-{row}')
        rows.append(f'"{image_id}","https://lh3.googleusercontent.com/-{image_id}/s1600/",'
                    f'"{landmark}"')
        k = seen[landmark] = seen.get(landmark, -1) + 1
        if row not in missing:
            write_image(osp.join(root, 'train', f'{image_id}.jpg'), image_fn(landmark, k))
    write_text(osp.join(root, 'train.csv'), rows)


def write_ncclean(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                  plan: Optional[Dict[str, list]] = None,
                  missing: Collection[Tuple[str, int]] = ()) -> None:
    """``annotation_clean_<split>.txt`` (``<url> <label>`` lines) and
    ``images/<file name of the url>``.

    ``plan``: ``{split: [label of each row]}``. ``missing``: ``(split, row)``
    of the rows whose image is not written (dead URLs; configs read them with
    ``skip_missing=True``). Default: labels ``landmark_000 ..``, ``per_class``
    interleaved rows each in ``train`` and one in ``val``.
    """
    if plan is None:
        labels = [f'landmark_{c:03d}' for c in range(check_int(classes, 'classes'))]
        plan = dict(train=_interleaved(labels, per_class), val=labels)
    class_of, seen = {}, {}
    for split, labels in plan.items():
        lines = []
        for row, label in enumerate(labels):
            name = f'{_image_id(f"nc-{split}-{row}")}.jpg'
            lines.append(f'http://static.panoramio.com/photos/original/{name} {label}')
            class_index = class_of.setdefault(label, len(class_of))
            k = seen[label] = seen.get(label, -1) + 1
            if (split, row) not in missing:
                write_image(osp.join(root, 'images', name), image_fn(class_index, k))
        write_text(osp.join(root, f'annotation_clean_{split}.txt'), lines)
