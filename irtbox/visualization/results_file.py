"""Image paths in a test result, and reading a ``tools/test.py --out`` .npz (and the revisited
ground truth it was ranked against) back."""
import os.path as osp
from typing import Dict, Optional, Sequence

import numpy as np

__all__ = ['relative_image_paths', 'load_results', 'load_revisited_gnd']


def relative_image_paths(dataset, sample_idx: Sequence[int]) -> Dict[str, np.ndarray]:
    """``img_path`` (n,) of the samples ``sample_idx`` of ``dataset``, relative to its
    ``data_root`` where they lie under it (else absolute), and ``data_root`` (0-d, absolute;
    '' when the dataset has none, the paths then being absolute), for ``tools/test.py --out``.

    ``dataset`` is an MMEngine ``BaseDataset`` (``get_data_info(i)['img_path']``).
    """
    root = osp.abspath(dataset.data_root) if getattr(dataset, 'data_root', '') else ''
    paths = []
    for i in sample_idx:
        path = osp.abspath(dataset.get_data_info(int(i))['img_path'])
        rel = osp.relpath(path, root) if root else path
        paths.append(path if rel.startswith('..') else rel)
    return dict(img_path=np.array(paths, dtype=str), data_root=np.array(root))


def load_results(path: str, prefix: str = '', need: Sequence[str] = ('embeddings', ),
                 data_root: Optional[str] = None) -> Dict[str, Optional[np.ndarray]]:
    """The arrays of one test set of a ``tools/test.py --out`` .npz.

    Returns ``embeddings`` (n x D), ``labels`` (n or None), ``is_query`` (n bool; all
    False when absent: leave-one-out), ``image_paths`` (n absolute-or-cwd paths, joined
    with ``data_root``; None when the file has no ``img_path``), ``class_names`` (or
    None) and ``metrics`` ({name: value}). ``prefix`` selects a test set of a
    multi-dataset run (e.g. '1/'); ``data_root`` replaces the stored root (images moved).
    Raises ``ValueError`` naming the file and the missing
    key when a key of ``need`` (among embeddings, labels, image_paths) is absent.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path}: no such file (expected the .npz written by '
                                'tools/test.py CONFIG CKPT --out results.npz)')
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ValueError(f'{path}: not a readable .npz ({error}); expected the file written '
                         'by tools/test.py --out results.npz') from error
    with data:
        keys = set(data.files)

        def get(key):
            return data[prefix + key] if prefix + key in keys else None

        out = dict(embeddings=get('embeddings'), labels=get('labels'), is_query=get('is_query'),
                   class_names=get('class_names'))
        rel, root = get('img_path'), get('data_root')
        out['metrics'] = {k[len('metrics/'):]: float(data[k]) for k in sorted(keys)
                          if k.startswith('metrics/') and data[k].ndim == 0}
    if rel is not None:
        root = data_root or (str(root) if root is not None else '')
        out['image_paths'] = [p if osp.isabs(p) or not root else osp.join(root, p)
                              for p in rel.tolist()]
    else:
        out['image_paths'] = None
    hints = dict(embeddings='rerun tools/test.py with --out results.npz',
                 labels='only labelled sets (RetrievalMetric) keep labels; for revisited Oxford '
                        '/ Paris pass --gnd gnd_*.pkl',
                 image_paths='written by tools/test.py --out since image paths were added; '
                             'rerun tools/test.py --out results.npz')
    prefixes = sorted({k[:-len('embeddings')] for k in keys if k.endswith('embeddings')})
    if out['embeddings'] is None and prefixes:
        choices = ', '.join(repr(p) if p else "'' (no --prefix)" for p in prefixes)
        raise ValueError(f"{path}: no '{prefix}embeddings'; its test sets have the prefixes "
                         f'{choices}: pick one with --prefix')
    for key in need:
        if out.get(key) is None:
            found = sorted(k for k in keys if not k.startswith('metrics/'))
            raise ValueError(f"{path}: no '{prefix}{key if key != 'image_paths' else 'img_path'}'"
                             f' array ({hints[key]}); the file has {found}')
    emb = out['embeddings']
    if emb is not None and (emb.ndim != 2 or len(emb) == 0):
        raise ValueError(f"{path}: '{prefix}embeddings' must be a non-empty n x D array, got "
                         f'shape {emb.shape}')
    n = len(emb) if emb is not None else None
    for key in ('labels', 'is_query', 'image_paths'):
        if out[key] is not None and n is not None and len(out[key]) != n:
            raise ValueError(f"{path}: '{prefix}{key}' has {len(out[key])} entries but there "
                             f'are {n} embeddings; expected one per sample')
    if out['is_query'] is None and n is not None:
        out['is_query'] = np.zeros(n, dtype=bool)
    return out


def load_revisited_gnd(path: str, protocol: str, owner: str = 'load_revisited_gnd',
                       key: str = 'gnd_file') -> list:
    """Per-query ``ok`` / ``junk`` indices of ``protocol`` ('easy', 'medium', 'hard') from a
    revisited Oxford / Paris ``gnd_*.pkl``. Raises ``FileNotFoundError`` or ``ValueError``
    naming the caller ``owner``, the argument ``key`` the path came from, and the file."""
    from irtbox.datasets.pickle_utils import load_pickle
    from irtbox.evaluation.functional import build_revisited_gnd
    raw = load_pickle(path, owner, key=key)
    if not isinstance(raw, dict) or 'gnd' not in raw:
        raise ValueError(f"{key} {path}: expected a dict with a 'gnd' list (the revisited "
                         'ground truth file)')
    try:
        return build_revisited_gnd(raw['gnd'], protocol)
    except (KeyError, TypeError) as error:
        raise ValueError(f'{key} {path}: {error}') from error
