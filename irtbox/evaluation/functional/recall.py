"""Recall@K: the fraction of queries with a same-label item among their K nearest neighbours."""
from typing import Dict, Iterable

import numpy as np

__all__ = ['first_hit_ranks', 'recall_from_first_hit', 'recall_from_relevance']


def first_hit_ranks(relevant: np.ndarray) -> np.ndarray:
    """0-based rank of each query's first relevant neighbour.

    Args:
        relevant: nq x k bool, neighbours by decreasing similarity.

    Returns:
        (nq,) float64 ranks; ``inf`` where no neighbour is relevant.
    """
    return np.where(relevant.any(axis=1), relevant.argmax(axis=1), np.inf)


def recall_from_first_hit(first_hit: np.ndarray, ks: Iterable[int]) -> Dict[int, float]:
    """Recall@K for each K from the 0-based rank of each query's first relevant item.

    Recall@K is the fraction of queries whose first relevant item ranks before K
    (``inf``: none, always a miss). Every query counts.
    """
    if len(first_hit) == 0:
        raise ValueError('recall: no queries; expected at least one.')
    return {int(k): float(np.mean(first_hit < k)) for k in ks}


def recall_from_relevance(relevant: np.ndarray, ks: Iterable[int]) -> Dict[int, float]:
    """Recall@K (a hit rate) for each K from a relevance matrix.

    Args:
        relevant: nq x k bool, ``relevant[i, j]`` = the j-th neighbour of
            query i (self excluded) has the query's label. K larger than k
            uses all k columns (the search returned the whole gallery).
        ks: the values of K.

    Returns:
        {K: fraction of queries with at least one True among their first K columns}, in [0, 1].
        Every query counts, also one whose class has no other member (it is always a miss).
    """
    return recall_from_first_hit(first_hit_ranks(relevant), ks)
