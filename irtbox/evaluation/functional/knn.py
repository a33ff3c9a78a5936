"""Exact k-nearest-neighbour search by inner product (cosine similarity), as arrays.

A thin wrapper of the search core (:mod:`.search`): the similarity matrix is never built
whole, queries are searched in chunks, so the temporaries are O(chunk_size x N).
"""
from typing import Optional, Tuple, Union

import numpy as np
import torch

from .checks import ArrayLike
from .search import auto_chunk_size, prepare_pair, topk_blocks

__all__ = ['knn']


def knn(query: ArrayLike,
        gallery: ArrayLike,
        k: int,
        exclude_self: bool = False,
        chunk_size: Optional[int] = None,
        backend: str = 'torch',
        device: Optional[Union[str, torch.device]] = None,
        normalize: bool = True) -> Tuple[ArrayLike, ArrayLike]:
    """The ``k`` most similar gallery items of each query, exactly.

    Similarity is the inner product of float32 embeddings; with
    ``normalize=True`` (default) rows are L2-normalised first, so it is the
    cosine similarity (for already normalised embeddings this changes nothing
    but rounding).

    Ties are broken deterministically: among equal similarities the lower
    gallery index comes first, both in the order of the result and in the
    choice of which tied items make the top ``k``.

    Args:
        query: nq x D array or tensor.
        gallery: N x D array or tensor.
        k: neighbours per query. Clipped to the number of gallery items a
            query can have (N, or N - 1 with ``exclude_self``), so the result
            may have fewer than ``k`` columns.
        exclude_self: leave-one-out search. Query i IS gallery item i
            (``query`` and ``gallery`` hold the same items, nq == N) and item
            i is left out of query i's neighbours by index, not by dropping
            the first neighbour, which exact duplicates and ties would break.
        chunk_size: queries searched at once; the temporaries are
            O(chunk_size x N). ``None``: as many as keep the similarity block
            under 128 MB.
        backend: ``'torch'`` (matrix product + top-k) or ``'faiss'``
            (``faiss.IndexFlatIP``, also exact; faiss-gpu when ``device`` is a
            CUDA device and faiss was built with GPU support).
        device: where to compute. Default: the query tensor's device (CPU for
            numpy input) for torch; CPU for faiss.
        normalize: L2-normalise query and gallery rows first.

    Returns:
        (similarities, indices), each nq x min(k, available), sorted by
        decreasing similarity: float32 and int64 numpy arrays for numpy input,
        torch tensors on the query's device for tensor input.
    """
    as_tensor = isinstance(query, torch.Tensor)
    out_device = query.device if as_tensor else torch.device('cpu')
    if backend not in ('torch', 'faiss'):
        raise ValueError(f"knn: backend must be 'torch' or 'faiss', got {backend!r}.")
    query_t, gallery_t = prepare_pair(query, gallery, 'knn', normalize)
    nq, n = query_t.shape[0], gallery_t.shape[0]
    if exclude_self and nq != n:
        raise ValueError(f'knn: exclude_self=True means query i is gallery item i, so '
                         f'query and gallery must hold the same items; got {nq} queries '
                         f'and {n} gallery items.')
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f'knn: k must be a positive integer, got {k!r}.')
    chunk_size = auto_chunk_size(chunk_size, n, 'knn')
    k = int(min(k, n - 1 if exclude_self else n))
    if k == 0:
        raise ValueError('knn: exclude_self=True with a single-item gallery leaves no '
                         'neighbour to return.')
    if backend == 'torch' and device is None:
        device = out_device
    # The result is what knn returns, so it is the one nq x k array kept.
    sims = torch.empty(nq, k, dtype=torch.float32, device=out_device)
    idx = torch.empty(nq, k, dtype=torch.long, device=out_device)
    for start, v, i in topk_blocks(query_t, gallery_t, k, chunk_size, backend, device,
                                   exclude_self):
        sims[start:start + len(v)], idx[start:start + len(i)] = v, i
    return (sims, idx) if as_tensor else (sims.numpy(), idx.numpy())
