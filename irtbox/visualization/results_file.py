"""Pictures from a saved test result, no model needed: a set of the embeddings file a
test writes (read with :func:`irtbox.structures.load_embeddings`, the one reader) drawn
as result grids and a results browser (:func:`browse_results`) or as a 2-D map
(:func:`plot_results_map`), and the revisited ground truth such a result is ranked against."""
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np

from irtbox.datasets.pickle_utils import load_pickle
from irtbox.evaluation.functional import build_revisited_gnd
from irtbox.structures.embeddings_file import (EmbeddingSet, embedding_set_names,
                                               load_embeddings)
from irtbox.utils.errors import ArgumentError

from .embedding_map import embed_2d, plot_embedding_map
from .grid import load_tile
from .report import show_results

__all__ = ['PRODUCE_HINT', 'load_result_set', 'load_revisited_gnd', 'browse_results',
           'plot_results_map']

PRODUCE_HINT = 'write one by testing the model into a .npz results file (run_test, out)'
# What a command may need of a set, where it comes from when it is missing, and the arguments
# that give it instead (the error's remedy).
_NEEDS = dict(
    ids=('image paths (ids)', 'a test\'s results file stores each sample\'s image path; '
         + PRODUCE_HINT, None),
    labels=('labels', 'only labelled test sets (RetrievalMetric) keep labels; for revisited '
            'Oxford / Paris pass the ground truth', dict(gnd_file='gnd_*.pkl')),
    is_query=('query flags (is_query)', PRODUCE_HINT, None))


def load_result_set(path: str, name: Optional[str] = None, need: Sequence[str] = (),
                    data_root: Optional[str] = None, mmap: bool = True) -> EmbeddingSet:
    """The set ``name`` of the embeddings file ``path`` (``load_embeddings``); without
    ``name``: the file's only
    set, or its main set ``''`` when others (a second metric's, ``'no_whitening'``) are
    there too. ``need``: fields the caller cannot do without, among 'ids', 'labels' and
    'is_query'. Raises ``FileNotFoundError`` / ``ValueError`` naming the file, the set and
    what is missing or wrong, with how to write a file that has it."""
    if name is None:
        names = embedding_set_names(path)
        if len(names) > 1 and '' in names:
            name = ''
    data = load_embeddings(path, name, mmap=mmap, data_root=data_root)
    where = path + (f' (set {name!r})' if name else '')
    if len(data) == 0:
        raise ValueError(f'{where}: no embeddings (0 rows); expected a test result with '
                         f'samples ({PRODUCE_HINT})')
    for field in need:
        if field not in _NEEDS:
            raise ValueError(f'load_result_set: need holds {field!r}; expected some of '
                             f'{sorted(_NEEDS)}')
        if getattr(data, field) is None:
            what, hint, remedy = _NEEDS[field]
            error = ArgumentError(f'{where}: no {what} ({hint})', 'path', path)
            error.remedy = remedy
            raise error
    return data


def load_revisited_gnd(path: str, protocol: str) -> list:
    """Per-query ``ok`` / ``junk`` indices of ``protocol`` ('easy', 'medium', 'hard') from a
    revisited Oxford / Paris ``gnd_*.pkl``. Raises an ``ArgumentError`` naming the argument
    ``gnd_file`` and the file: not found, not readable, not a ground truth."""
    if not osp.isfile(path):
        raise ArgumentError(f'gnd_file {path}: not found', 'gnd_file', path)
    try:
        raw = load_pickle(path)
        if not isinstance(raw, dict) or 'gnd' not in raw:
            raise ValueError("expected a dict with a 'gnd' list (the revisited ground truth "
                             'file)')
        return build_revisited_gnd(raw['gnd'], protocol)
    except (KeyError, TypeError, ValueError) as error:
        raise ArgumentError(f'gnd_file {path}: {error}', 'gnd_file', path) from error


def browse_results(path: str, out_dir: str, name: Optional[str] = None,
                   data_root: Optional[str] = None, gnd_file: Optional[str] = None,
                   protocol: str = 'medium', num: int = 50, k: int = 8, seed: int = 0,
                   worst: int = 0) -> List[dict]:
    """Result grids, ``index.html`` and ``failures.csv`` in ``out_dir`` from the set ``name``
    of the results file ``path`` (as a test draws them; see
    :func:`~irtbox.visualization.show_results` for ``num``, ``k``, ``seed`` and ``worst``).
    ``data_root``: where the images are now, when they moved since the test. ``gnd_file``:
    a revisited ``gnd_*.pkl`` whose ``protocol`` says what is correct and junk, for a set
    without labels. Returns the drawn queries' records; ``ValueError`` /
    ``FileNotFoundError`` naming the file at fault."""
    data = load_result_set(path, name, need=('ids', ) + (() if gnd_file else ('labels', )),
                           data_root=data_root)
    paths = data.paths()
    checked = paths[:1000]
    missing = [p for p in checked if not osp.isfile(p)]
    if missing and len(missing) == len(checked):
        raise ArgumentError(f'{path}: none of the images is where the file says (e.g. '
                            f'{missing[0]}); pass the folder they are in now as the data root',
                            'data_root', data_root)
    gnd = load_revisited_gnd(gnd_file, protocol) if gnd_file else None
    try:
        return show_results(out_dir, data.embeddings, paths, is_query=data.is_query,
                            labels=None if gnd is not None else data.labels, gnd=gnd,
                            class_names=data.class_names, metrics=data.metrics, num=num, k=k,
                            seed=seed, worst=worst)
    except ValueError as error:
        raise ValueError(f'{path}: {error}') from error


def plot_results_map(path: str, out: str, method: str = 'tsne', name: Optional[str] = None,
                     max_points: int = 5000, thumbnails: int = 0, seed: int = 0) -> np.ndarray:
    """A 2-D map (``method``: 'pca', 'tsne', 'umap'; :func:`embed_2d`) of the set ``name`` of
    the results file ``path``, coloured by class where it has labels, written to the image
    ``out``: at most ``max_points`` samples (sampled with ``seed``), ``thumbnails`` of them
    drawn as images (needs the set's image paths). Returns the points (m x 2); ``ValueError``
    naming the file when it has fewer than 3 samples, ``ImportError`` when the method's
    package is missing."""
    data = load_result_set(path, name, need=('ids', ) if thumbnails else ())
    emb, labels = data.embeddings, data.labels
    rng = np.random.default_rng(seed)
    keep = np.arange(len(emb))
    if len(emb) > max_points:
        keep = np.sort(rng.choice(len(emb), max_points, replace=False))
    if len(keep) < 3:
        raise ValueError(f'{path}: {len(keep)} embeddings; a map needs at least 3')
    points = embed_2d(np.asarray(emb[keep]), method, seed=seed)
    paths = data.paths() if thumbnails else []
    thumbs = [(int(i), np.asarray(load_tile(paths[keep[i]], 64)))
              for i in rng.choice(len(keep), min(thumbnails, len(keep)), replace=False)]
    title = f'{osp.basename(path)}: {method}, {len(keep)} of {len(emb)} samples'
    plot_embedding_map(points, None if labels is None else np.asarray(labels)[keep], out,
                       class_names=data.class_names, title=title, thumbnails=thumbs)
    return points
