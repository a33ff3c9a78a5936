"""Gathering per-sample metric results from all ranks, ordered by sample index.

Shared by the metrics that need the whole test set at once. Padding (the
repeated samples MMEngine's DefaultSampler adds in distributed runs) is
removed by dropping repeated sample indices, not by cutting the gathered
list at the dataset size, which relies on the sampler's order.
"""
import logging
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from mmengine.dist import collect_results, get_world_size, is_main_process
from mmengine.logging import print_log

from ..functional.checks import non_finite_rows

__all__ = ['embedding_to_numpy', 'pack_results', 'merge_by_sample_idx', 'gather_by_sample_idx',
           'check_finite_embeddings']

# Rows checked at a time: a bool mask of a whole 1M x 768 test set would take 0.8 GB.
_FINITE_ROWS = 1 << 16


def embedding_to_numpy(embedding) -> np.ndarray:
    """A data sample's embedding (tensor or array) as a flat float32 numpy vector on the CPU."""
    if isinstance(embedding, torch.Tensor):
        return embedding.detach().float().cpu().numpy().reshape(-1)
    return np.asarray(embedding, dtype=np.float32).reshape(-1)


def pack_results(results: List[dict]) -> Optional[Dict[str, np.ndarray]]:
    """Per-sample dicts (same keys, one of them ``sample_idx``) -> one stacked
    array per key, cheap to send between ranks; ``None`` if empty."""
    if not results:
        return None
    packed = {key: np.stack([np.asarray(r[key]) for r in results]) for key in results[0]}
    packed['sample_idx'] = packed['sample_idx'].astype(np.int64)
    return packed


def merge_by_sample_idx(parts: Sequence[Optional[dict]],
                        size: Optional[int],
                        consistent: Optional[Dict[str, str]] = None) -> Dict[str, np.ndarray]:
    """Concatenate packed parts, order by sample index, drop repeated indices.

    Args:
        parts: outputs of :func:`pack_results` (``None`` for an empty part).
        size: the dataset size, for a warning when fewer or more distinct
            samples arrived; ``None`` skips the check.
        consistent: keys that a repeated sample index must repeat unchanged
            (a clash means two different samples share an index), mapped to
            their name in the error message.

    Returns:
        One array per key, rows in increasing ``sample_idx``.
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        raise ValueError('no sample was processed; expected the predict outputs of the '
                         'test set in process().')
    data = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    order = np.argsort(data['sample_idx'], kind='stable')
    idx = data['sample_idx'][order]
    first = np.ones(len(idx), dtype=bool)
    first[1:] = idx[1:] != idx[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0))
    for key, what in (consistent or {}).items():
        values = data[key][order]
        clash = (values != values[group_start]).reshape(len(idx), -1).any(axis=1)
        if clash.any():
            bad = idx[np.argmax(clash)]
            raise ValueError(f'sample_idx {bad} arrives with different {what}; '
                             'sample_idx must identify one sample of the test set (e.g. '
                             'datasets concatenated without re-indexing).')
    data = {key: value[order[first]] for key, value in data.items()}
    if size is not None and len(data['sample_idx']) != size:
        print_log(f'{len(data["sample_idx"])} distinct test samples were evaluated but '
                  f'the dataset has {size}.', logger='current', level=logging.WARNING)
    return data


def gather_by_sample_idx(results: List[dict],
                         size: Optional[int],
                         collect_device: str = 'cpu',
                         collect_dir: Optional[str] = None,
                         consistent: Optional[Dict[str, str]] = None
                         ) -> Optional[Dict[str, np.ndarray]]:
    """Every rank's per-sample results, merged by :func:`merge_by_sample_idx`.

    Collective: call on every rank. Returns the merged arrays on the main
    process and ``None`` elsewhere.
    """
    # One packed part per rank, so collect_results' cut at `size` keeps all.
    part = [pack_results(results)]
    if collect_device == 'cpu':
        parts = collect_results(part, get_world_size(), 'cpu', tmpdir=collect_dir)
    else:
        parts = collect_results(part, get_world_size(), collect_device)
    if not is_main_process():
        return None
    return merge_by_sample_idx(parts, size, consistent)


def check_finite_embeddings(embeddings: np.ndarray, sample_idx: np.ndarray, metric: str) -> None:
    """Raise ``ValueError`` when rows of the gathered n x D ``embeddings`` hold NaN or inf,
    naming how many and the first sample indices: a model that outputs NaN would otherwise
    be scored (and its results file written) as if nothing were wrong."""
    bad = non_finite_rows(embeddings, _FINITE_ROWS)
    if len(bad):
        shown = ', '.join(str(int(i)) for i in sample_idx[bad[:5]])
        raise ValueError(f'{metric}: the model gave non-finite (NaN or inf) embeddings for '
                         f'{len(bad)} of {len(embeddings)} test images (sample_idx {shown}'
                         f'{" ..." if len(bad) > 5 else ""}); check the checkpoint for NaN '
                         'weights. Nothing is scored.')
