"""Every retrieval metric of a labelled query set from one nearest-neighbour search."""
from typing import Dict, Iterable

import numpy as np
import torch

from .checks import as_vector
from .knn import knn
from .map_at_r import count_relevant, map_at_r_from_relevance
from .recall import recall_from_relevance

# Query rows turned into relevance at once (bounds the label-gather temporary).
_BLOCK = 8192


def retrieval_metrics(query_emb,
                      query_labels,
                      gallery_emb=None,
                      gallery_labels=None,
                      ks: Iterable[int] = (1, ),
                      map_at_r: bool = True,
                      **search_kwargs) -> Dict[str, float]:
    """Recall@K and MAP@R / R-precision / Precision@1 from ONE exact search.

    The search asks for k = max(max(ks), max_i R_i) neighbours (R_i = number
    of gallery items with query i's label), enough for every metric; k is
    clipped to the gallery size by :func:`knn`.

    Args:
        query_emb: nq x D embeddings (numpy array or torch tensor).
        query_labels: nq labels (numpy array, tensor or list).
        gallery_emb, gallery_labels: N x D and N. Both ``None``:
            leave-one-out, the queries are the gallery and query i is
            excluded from its own search by index (SOP, CUB, Cars protocol).
            Given: queries are searched in this gallery only (In-Shop).
        ks: the K of Recall@K.
        map_at_r: also compute MAP@R, R-precision and Precision@1.
        **search_kwargs: passed to :func:`knn` (``backend``, ``chunk_size``,
            ``device``, ``normalize``).

    Returns:
        ``{'recall@K': ...}`` for each K and, with ``map_at_r``, ``'map@r'``,
        ``'r_precision'``, ``'precision@1'``; all fractions in [0, 1].
        Recall@K counts every query; MAP@R, R-precision and Precision@1 drop
        queries with R_i = 0 (Musgrave et al. 2020).
    """
    leave_one_out = gallery_emb is None
    if leave_one_out != (gallery_labels is None):
        raise ValueError('retrieval_metrics: give both gallery_emb and gallery_labels, or '
                         'neither (leave-one-out).')
    query_labels = as_vector(query_labels, 'query_labels', 'retrieval_metrics',
                             _num_rows(query_emb, 'query_emb'), entry='label')
    if len(query_labels) == 0:
        raise ValueError('retrieval_metrics: no queries; expected at least one.')
    if leave_one_out:
        gallery_emb, gallery_labels = query_emb, query_labels
    else:
        gallery_labels = as_vector(gallery_labels, 'gallery_labels', 'retrieval_metrics',
                                   _num_rows(gallery_emb, 'gallery_emb'), entry='label')
        if len(gallery_labels) == 0:
            raise ValueError('retrieval_metrics: the gallery is empty; expected at least '
                             'one item.')
    ks = _check_ks(ks)
    if not ks and not map_at_r:
        raise ValueError('retrieval_metrics: nothing to compute (ks is empty and '
                         'map_at_r=False).')

    num_relevant = count_relevant(query_labels, gallery_labels, leave_one_out)
    k = max(ks + ((int(num_relevant.max()), ) if map_at_r else ()))
    _, neighbours = knn(query_emb, gallery_emb, max(k, 1), exclude_self=leave_one_out,
                        **search_kwargs)
    if isinstance(neighbours, torch.Tensor):
        neighbours = neighbours.cpu().numpy()
    relevant = np.empty(neighbours.shape, dtype=bool)
    for start in range(0, len(neighbours), _BLOCK):
        stop = start + _BLOCK
        relevant[start:stop] = gallery_labels[neighbours[start:stop]] \
            == query_labels[start:stop, None]

    metrics = {f'recall@{k}': v for k, v in recall_from_relevance(relevant, ks).items()}
    if map_at_r:
        m = map_at_r_from_relevance(relevant, num_relevant)
        metrics.update({'map@r': m['map_at_r'], 'r_precision': m['r_precision'],
                        'precision@1': m['precision_at_1']})
    return metrics


def _num_rows(emb, name: str) -> int:
    if not isinstance(emb, (np.ndarray, torch.Tensor)) or emb.ndim != 2:
        raise ValueError(f'retrieval_metrics: {name} must be a 2-D numpy array or torch '
                         f'tensor (items x dimension), got {type(emb).__name__} '
                         f'{tuple(getattr(emb, "shape", ()))}.')
    return emb.shape[0]


def _check_ks(ks) -> tuple:
    ks = (ks, ) if isinstance(ks, (int, np.integer)) else tuple(ks)
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f'retrieval_metrics: every K in ks must be a positive '
                             f'integer, got {k!r} in {ks}.')
    return tuple(dict.fromkeys(int(k) for k in ks))
