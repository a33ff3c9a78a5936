"""MAP@R, R-precision and Precision@1 (Musgrave et al., "A Metric Learning Reality Check", 2020)."""
import warnings
from typing import Dict

import numpy as np

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


def map_at_r_from_relevance(relevant: np.ndarray, num_relevant: np.ndarray) -> Dict[str, float]:
    """MAP@R, R-precision and Precision@1 from a relevance matrix.

    For query i with R_i same-label items in the gallery and rel_j = 1 when
    its j-th neighbour has its label (Musgrave et al. 2020, Sec. 3.2):
    MAP@R_i = (1/R_i) Σ_{j≤R_i} rel_j·P@j with P@j = (Σ_{t≤j} rel_t)/j;
    R-precision_i = (Σ_{j≤R_i} rel_j)/R_i; Precision@1_i = rel_1.
    Queries with R_i = 0 are dropped (not counted as 0); the means are over
    the rest.

    Args:
        relevant: nq x k bool, neighbours by decreasing similarity (self
            excluded), with k >= max R_i.
        num_relevant: nq ints, R_i.

    Returns:
        {'map_at_r', 'r_precision', 'precision_at_1'}, each in [0, 1]; NaN
        (with a warning) when no query has R_i > 0.
    """
    num_relevant = np.asarray(num_relevant)
    keep = num_relevant > 0
    if not keep.any():
        warnings.warn('map_at_r: no query has another item of its class; '
                      'MAP@R, R-precision and Precision@1 are NaN.')
        return dict(map_at_r=float('nan'), r_precision=float('nan'),
                    precision_at_1=float('nan'))
    relevant, num_relevant = relevant[keep], num_relevant[keep]
    if relevant.shape[1] < num_relevant.max():
        raise ValueError(f'map_at_r: {relevant.shape[1]} neighbours per query were given '
                         f'but a query has R = {num_relevant.max()}; MAP@R needs the top '
                         'max(R) neighbours.')
    ap_sum = rp_sum = 0.0
    for start in range(0, len(relevant), _BLOCK):
        r = num_relevant[start:start + _BLOCK]
        width = int(r.max())
        ranks = np.arange(1, width + 1)
        rel = relevant[start:start + _BLOCK, :width] & (ranks <= r[:, None])
        hits = np.cumsum(rel, axis=1)
        ap_sum += float((((hits / ranks) * rel).sum(axis=1) / r).sum())
        rp_sum += float((hits[:, -1] / r).sum())
    n = len(relevant)
    return dict(map_at_r=ap_sum / n, r_precision=rp_sum / n,
                precision_at_1=float(relevant[:, 0].mean()))


def map_at_r(emb,
             labels,
             gallery_emb=None,
             gallery_labels=None,
             **search_kwargs) -> Dict[str, float]:
    """MAP@R, R-precision and Precision@1 of a labelled set (Musgrave et al. 2020).

    Args:
        emb: n x D embeddings (numpy array or torch tensor).
        labels: n labels.
        gallery_emb, gallery_labels: optional separate gallery (N x D, N);
            ``None`` = leave-one-out on ``emb`` (each item excluded from its
            own search by index).
        **search_kwargs: passed to :func:`~irtbox.evaluation.functional.knn`.

    Returns:
        {'map_at_r', 'r_precision', 'precision_at_1'}, each in [0, 1].
    """
    # Imported here: retrieval.py builds on this module's pure functions.
    from .retrieval import retrieval_metrics
    metrics = retrieval_metrics(emb, labels, gallery_emb, gallery_labels, ks=(),
                                map_at_r=True, **search_kwargs)
    return dict(map_at_r=metrics['map@r'], r_precision=metrics['r_precision'],
                precision_at_1=metrics['precision@1'])
