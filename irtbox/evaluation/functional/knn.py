"""k-nearest-neighbour search by inner product (cosine similarity), as arrays.

A thin wrapper of a searcher (:mod:`irtbox.evaluation.neighbours`, exact by default): queries
are searched in chunks and only the nq x k result is kept.
"""
from typing import Tuple, Union

import numpy as np
import torch

from irtbox.utils.checks import check_positive_int
from ..neighbours import Searcher, build_searcher
from .checks import ArrayLike
from .ranking import prepare_pair

__all__ = ['knn']


def knn(query: ArrayLike,
        gallery: ArrayLike,
        k: int,
        exclude_self: bool = False,
        searcher: Union[None, dict, Searcher] = None,
        normalize: bool = True) -> Tuple[ArrayLike, ArrayLike]:
    """The ``k`` most similar gallery items of each query.

    Similarity is the inner product of float32 embeddings (the cosine with ``normalize``).
    With an exact searcher (the default) the lower gallery index wins a tie, in the order
    and in the choice of the top ``k``.

    Args:
        query: nq x D array or tensor.
        gallery: N x D array or tensor.
        k: neighbours per query. Clipped to the number of gallery items a query can have (N,
            or N - 1 with ``exclude_self``), so the result may have fewer than ``k`` columns.
        exclude_self: leave-one-out search (nq == N): item i is left out of query i's
            neighbours by index, not by dropping the first neighbour (duplicates, ties).
        searcher: a :class:`~irtbox.evaluation.neighbours.Searcher` or its config dict, e.g.
            ``ExactSearcher(chunk_size=256, device='cuda')`` or ``FaissSearcher()`` (exact too);
            ``None``: ``ExactSearcher()`` (chunks of at most 128 MB, on the query's device).
        normalize: L2-normalise query and gallery rows first.

    Returns:
        (similarities, indices), each nq x min(k, available), sorted by
        decreasing similarity: float32 and int64 numpy arrays for numpy input,
        torch tensors on the query's device for tensor input. An approximate
        searcher may leave entries unfound: index -1, similarity -inf.
    """
    as_tensor = isinstance(query, torch.Tensor)
    out_device = query.device if as_tensor else torch.device('cpu')
    searcher = build_searcher(searcher, 'searcher')
    query_t, gallery_t = prepare_pair(query, gallery, normalize)
    nq, n = query_t.shape[0], gallery_t.shape[0]
    if exclude_self and nq != n:
        raise ValueError(f'knn: exclude_self=True means query i is gallery item i, so '
                         f'query and gallery must hold the same items; got {nq} queries '
                         f'and {n} gallery items.')
    k = min(check_positive_int(k, 'k'), n - 1 if exclude_self else n)
    if k == 0:
        raise ValueError('knn: exclude_self=True with a single-item gallery leaves no '
                         'neighbour to return.')
    # The result is what knn returns, so it is the one nq x k array kept.
    sims = torch.empty(nq, k, dtype=torch.float32, device=out_device)
    idx = torch.empty(nq, k, dtype=torch.long, device=out_device)
    for block in searcher.search(query_t, gallery_t, k,
                                 np.arange(nq) if exclude_self else None):
        rows = slice(block.start, block.start + len(block.ids))
        sims[rows], idx[rows] = block.scores, block.ids
    return (sims, idx) if as_tensor else (sims.numpy(), idx.numpy())
