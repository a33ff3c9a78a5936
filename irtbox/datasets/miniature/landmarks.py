"""Miniatures of the particular-object sets: SfM-120k (training tuples and the
whitening set), Revisited Oxford / Paris and the R1M distractors, each in its
official layout.

``image_fn(class_index, image_index)`` gets the landmark (3D model) number
and the image's position among that landmark's images.
"""
import hashlib
import os.path as osp
from typing import Sequence

import numpy as np

from ..sfm120k import cid_to_path
from irtbox.utils.checks import check_int
from .common import ImageFn, write_image, write_pickle, write_text

__all__ = ['R1M_FIRST_CLASS', 'write_revisited', 'write_revisitop1m', 'write_sfm120k']

# Landmark names of the two datasets, for image names that look like the released ones.
_LANDMARKS = {
    'roxford5k': ('all_souls', 'ashmolean', 'balliol', 'bodleian', 'christ_church',
                  'cornmarket', 'hertford', 'keble', 'magdalen', 'pitt_rivers',
                  'radcliffe_camera'),
    'rparis6k': ('defense', 'eiffel', 'invalides', 'louvre', 'moulinrouge', 'museedorsay',
                 'notredame', 'pantheon', 'pompidou', 'sacrecoeur', 'triomphe'),
}
_PREFIX = {'roxford5k': '', 'rparis6k': 'paris_'}
_OTHERS = {'roxford5k': 'oxford', 'rparis6k': 'paris_general'}
_RELEVANCE = ('easy', 'hard', 'junk')
# Distractor k is class R1M_FIRST_CLASS + k: one class each, none of the landmarks' classes.
R1M_FIRST_CLASS = 10000


def _cid(text: str) -> str:
    """A 32-hex image name like SfM-120k's, stable for ``text``."""
    return hashlib.md5(text.encode()).hexdigest()


def _sfm_split(root: str, image_fn: ImageFn, split: str, clusters: Sequence[int],
               per_class: int) -> dict:
    """Write the images of one split; its entry of the pickle. Image i belongs to
    cluster ``clusters[i % n]`` (interleaved: nothing may rely on grouping); every
    two consecutive images of a cluster are a query/positive pair."""
    n = len(clusters)
    cids = [_cid(f'{split}/{c}/{k}') for k in range(per_class) for c in clusters]
    for i, cid in enumerate(cids):
        write_image(osp.join(root, 'ims', cid_to_path(cid)), image_fn(clusters[i % n], i // n))
    pairs = [(c + k * n, c + (k + 1) * n) for c in range(n) for k in range(per_class - 1)]
    return dict(cids=cids, cluster=[clusters[i % n] for i in range(len(cids))],
                qidxs=[q for q, _ in pairs], pidxs=[p for _, p in pairs])


def write_sfm120k(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4) -> None:
    """``retrieval-SfM-120k.pkl``, ``retrieval-SfM-120k-whiten.pkl`` and
    ``ims/<cid[-2:]>/<cid[-4:-2]>/<cid[-6:-4]>/<cid>`` (no extension).

    ``train``: clusters ``0 .. classes - 1``, ``val``: the next
    ``max(1, classes // 2)``, ``per_class`` (>= 2) images each and
    ``per_class - 1`` query/positive pairs per cluster. So tuple mode has
    ``classes * (per_class - 1)`` pairs (``qsize`` at most that) and
    ``classes - 1`` other clusters to draw negatives from (``nnum`` at most
    that). The whitening set: two more images of every ``val`` cluster, a
    matching pair each.
    """
    check_int(classes, 'classes')
    check_int(per_class, 'per_class', 2)
    train = list(range(classes))
    val = list(range(classes, classes + max(1, classes // 2)))
    write_pickle(osp.join(root, 'retrieval-SfM-120k.pkl'),
                 dict(train=_sfm_split(root, image_fn, 'train', train, per_class),
                      val=_sfm_split(root, image_fn, 'val', val, per_class)))
    cids = [_cid(f'whiten/{c}/{k}') for c in val for k in range(2)]
    for i, cid in enumerate(cids):
        write_image(osp.join(root, 'ims', cid_to_path(cid)),
                    image_fn(val[i // 2], per_class + i % 2))
    write_pickle(osp.join(root, 'retrieval-SfM-120k-whiten.pkl'),
                 dict(cids=cids, qidxs=list(range(0, len(cids), 2)),
                      pidxs=list(range(1, len(cids), 2))))


def write_revisited(root: str, image_fn: ImageFn, dataset_name: str, classes: int = 8,
                    per_class: int = 4, relevance: Sequence[str] = ('easy', 'hard', 'junk', 'easy'),
                    others: int = 4) -> None:
    """``gnd_<dataset_name>.pkl`` and ``jpg/<name>.jpg``.

    ``classes`` landmarks with one query each, image 0 of the landmark, its
    ``bbx`` the central three quarters of it (floats, inside the image); the
    database holds ``per_class`` more images of every landmark, the k-th
    labelled ``relevance[k % len(relevance)]`` (``'easy'``, ``'hard'`` or
    ``'junk'``) for its query, and ``others`` images of classes of their own
    (``classes ..``) that are no query's. The database order is shuffled
    (fixed seed).
    """
    check_int(classes, 'classes')
    check_int(per_class, 'per_class')
    check_int(others, 'others', 0)
    if not relevance or any(r not in _RELEVANCE for r in relevance):
        raise ValueError(f'relevance must be a non-empty sequence of {_RELEVANCE}, '
                         f'got {relevance!r}')
    names, prefix = _LANDMARKS[dataset_name], _PREFIX[dataset_name]

    def name(c: int, k: int) -> str:
        return f'{prefix}{names[c % len(names)]}_{1000 * (c // len(names)) + k:06d}'

    # (name, class, image index, (query, relevance) or None)
    database = [(name(c, k + 1), c, k + 1, (c, relevance[k % len(relevance)]))
                for c in range(classes) for k in range(per_class)]
    database += [(f'{_OTHERS[dataset_name]}_{j:06d}', classes + j, 0, None)
                 for j in range(others)]
    database = [database[i] for i in np.random.default_rng(0).permutation(len(database))]
    gnd = [dict(easy=[], hard=[], junk=[]) for _ in range(classes)]
    for i, (image_name, c, k, label) in enumerate(database):
        write_image(osp.join(root, 'jpg', f'{image_name}.jpg'), image_fn(c, k))
        if label is not None:
            gnd[label[0]][label[1]].append(i)
    for c in range(classes):
        img = image_fn(c, 0)
        write_image(osp.join(root, 'jpg', f'{name(c, 0)}.jpg'), img)
        height, width = img.shape[:2]
        gnd[c]['bbx'] = [width / 8, height / 8, width * 7 / 8, height * 7 / 8]
    write_pickle(osp.join(root, f'gnd_{dataset_name}.pkl'),
                 dict(imlist=[d[0] for d in database],
                      qimlist=[name(c, 0) for c in range(classes)], gnd=gnd))


def write_revisitop1m(root: str, image_fn: ImageFn, count: int = 8) -> None:
    """``revisitop1m.txt`` (one image path per line, relative to ``jpg/``) and
    ``jpg/<k % 2>/r1m_<k:07d>.jpg``; distractor k is image 0 of class
    ``R1M_FIRST_CLASS + k``."""
    check_int(count, 'count')
    lines = [f'{k % 2}/r1m_{k:07d}.jpg' for k in range(count)]
    for k, rel in enumerate(lines):
        write_image(osp.join(root, 'jpg', rel), image_fn(R1M_FIRST_CLASS + k, 0))
    write_text(osp.join(root, 'revisitop1m.txt'), lines)
