"""MAP@R, R-precision and Precision@1 (Musgrave et al., "A Metric Learning Reality Check", 2020)."""
import warnings
from typing import Dict, Tuple

import numpy as np

__all__ = ['count_relevant', 'map_at_r_per_query', 'map_at_r_means', 'map_at_r_from_relevance']

# Rows of the relevance matrix handled at once (bounds the float temporaries).
_BLOCK = 4096


def count_relevant(query_labels: np.ndarray, gallery_labels: np.ndarray,
                   leave_one_out: bool) -> np.ndarray:
    """R_i: how many gallery items share query i's label (itself not counted
    when ``leave_one_out``, where the gallery is the query set)."""
    classes, counts = np.unique(gallery_labels, return_counts=True)
    pos = np.clip(np.searchsorted(classes, query_labels), 0, len(classes) - 1)
    found = classes[pos] == query_labels
    r = np.where(found, counts[pos], 0)
    return r - 1 if leave_one_out else r


def map_at_r_per_query(relevant: np.ndarray,
                       num_relevant: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-query AP@R, R-precision and Precision@1 from the top neighbours' relevance.

    For query i with R_i same-label items in the gallery and rel_j = 1 when
    its j-th neighbour has its label (Musgrave et al. 2020, Sec. 3.2):
    AP@R_i = (1/R_i) Σ_{j≤R_i} rel_j·P@j with P@j = (Σ_{t≤j} rel_t)/j;
    R-precision_i = (Σ_{j≤R_i} rel_j)/R_i; Precision@1_i = rel_1.

    Args:
        relevant: nq x k bool, neighbours by decreasing similarity (self
            excluded), with k >= max R_i.
        num_relevant: nq ints, R_i.

    Returns:
        (ap, rp, p1): three (nq,) float64 arrays, NaN where R_i = 0.
    """
    num_relevant = np.asarray(num_relevant)
    nq = len(num_relevant)
    ap, rp, p1 = (np.full(nq, np.nan) for _ in range(3))
    keep = np.flatnonzero(num_relevant > 0)
    if not len(keep):
        return ap, rp, p1
    if relevant.shape[1] < num_relevant[keep].max():
        raise ValueError(f'map_at_r: {relevant.shape[1]} neighbours per query were given '
                         f'but a query has R = {num_relevant[keep].max()}; MAP@R needs the '
                         'top max(R) neighbours.')
    for start in range(0, len(keep), _BLOCK):
        rows = keep[start:start + _BLOCK]
        r = num_relevant[rows]
        width = int(r.max())
        ranks = np.arange(1, width + 1)
        rel = relevant[rows, :width] & (ranks <= r[:, None])
        hits = np.cumsum(rel, axis=1)
        ap[rows] = ((hits / ranks) * rel).sum(axis=1) / r
        rp[rows] = hits[:, -1] / r
        p1[rows] = rel[:, 0]
    return ap, rp, p1


def map_at_r_means(ap: np.ndarray, rp: np.ndarray, p1: np.ndarray) -> Dict[str, float]:
    """{'map@r', 'r_precision', 'precision@1'}: means over the queries with R_i > 0
    (not NaN); NaN with a warning when there is none."""
    keep = ~np.isnan(ap)
    if not keep.any():
        warnings.warn('map_at_r: no query has another item of its class; '
                      'MAP@R, R-precision and Precision@1 are NaN.')
        return {'map@r': float('nan'), 'r_precision': float('nan'),
                'precision@1': float('nan')}
    return {'map@r': float(ap[keep].mean()), 'r_precision': float(rp[keep].mean()),
            'precision@1': float(p1[keep].mean())}


def map_at_r_from_relevance(relevant: np.ndarray, num_relevant: np.ndarray) -> Dict[str, float]:
    """MAP@R, R-precision and Precision@1 from a relevance matrix
    (:func:`map_at_r_per_query`, then the means over queries with R_i > 0).

    Returns:
        {'map@r', 'r_precision', 'precision@1'}, each in [0, 1]; NaN (with a
        warning) when no query has R_i > 0.
    """
    return map_at_r_means(*map_at_r_per_query(relevant, num_relevant))
