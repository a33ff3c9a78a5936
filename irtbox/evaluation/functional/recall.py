"""Recall@K: the fraction of queries with a same-label item among their K nearest neighbours."""
from typing import Dict, Iterable

import numpy as np


def recall_from_relevance(relevant: np.ndarray, ks: Iterable[int]) -> Dict[int, float]:
    """Recall@K (a hit rate) for each K from a relevance matrix.

    Args:
        relevant: nq x k bool, ``relevant[i, j]`` = the j-th neighbour of
            query i (self excluded) has the query's label. K larger than k
            uses all k columns (the search returned the whole gallery).
        ks: the values of K.

    Returns:
        {K: fraction of queries with at least one True among their first K
        columns}, in [0, 1]. Every query counts, also one whose class has no
        other member (it is always a miss).
    """
    if relevant.shape[0] == 0:
        raise ValueError('recall: no queries; expected at least one.')
    # Rank of the first relevant neighbour; queries with none never hit.
    first_hit = np.where(relevant.any(axis=1), relevant.argmax(axis=1), np.inf)
    return {int(k): float(np.mean(first_hit < k)) for k in ks}


def recall_at_k(query_emb,
                query_labels,
                gallery_emb=None,
                gallery_labels=None,
                ks: Iterable[int] = (1, ),
                **search_kwargs) -> Dict[int, float]:
    """Recall@K of queries searched in a gallery (Recall@K of Song et al. 2016 / Jégou et al.).

    Args:
        query_emb: nq x D embeddings (numpy array or torch tensor).
        query_labels: nq labels.
        gallery_emb, gallery_labels: N x D and N; ``None`` = leave-one-out on
            the queries themselves (query i excluded from its own search by
            index).
        ks: the values of K.
        **search_kwargs: passed to :func:`~irtbox.evaluation.functional.knn`
            (``backend``, ``chunk_size``, ``device``, ``normalize``).

    Returns:
        {K: recall@K in [0, 1]}.
    """
    # Imported here: retrieval.py builds on this module's recall_from_relevance.
    from .retrieval import retrieval_metrics
    ks = tuple(ks)
    metrics = retrieval_metrics(query_emb, query_labels, gallery_emb, gallery_labels,
                                ks=ks, map_at_r=False, **search_kwargs)
    return {int(k): metrics[f'recall@{k}'] for k in ks}
