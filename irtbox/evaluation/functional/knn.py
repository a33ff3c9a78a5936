"""Exact k-nearest-neighbour search by inner product (cosine similarity).

The similarity matrix is never built whole: queries are searched in chunks,
so memory is O(chunk_size x N) for a gallery of N items.
"""
import warnings
from typing import Optional, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from .checks import as_float_matrix

ArrayLike = Union[np.ndarray, torch.Tensor]

# faiss-gpu selects at most this many neighbours per query.
_FAISS_GPU_MAX_K = 2048


def knn(query: ArrayLike,
        gallery: ArrayLike,
        k: int,
        exclude_self: bool = False,
        chunk_size: int = 1024,
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
        chunk_size: queries searched at once; memory is O(chunk_size x N).
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
    query_t = as_float_matrix(query, 'query', 'knn')
    gallery_t = as_float_matrix(gallery, 'gallery', 'knn')
    nq, n = query_t.shape[0], gallery_t.shape[0]
    if query_t.shape[1] != gallery_t.shape[1]:
        raise ValueError(f'knn: query has dimension {query_t.shape[1]} but gallery has '
                         f'{gallery_t.shape[1]}; expected the same embedding size.')
    if n == 0:
        raise ValueError('knn: the gallery is empty; expected at least one item.')
    if exclude_self and nq != n:
        raise ValueError(f'knn: exclude_self=True means query i is gallery item i, so '
                         f'query and gallery must hold the same items; got {nq} queries '
                         f'and {n} gallery items.')
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f'knn: k must be a positive integer, got {k!r}.')
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f'knn: chunk_size must be a positive integer, got {chunk_size!r}.')
    k = int(min(k, n - 1 if exclude_self else n))
    if k == 0:
        raise ValueError('knn: exclude_self=True with a single-item gallery leaves no '
                         'neighbour to return.')
    if normalize:
        query_t = F.normalize(query_t, dim=1)
        gallery_t = F.normalize(gallery_t, dim=1)

    if backend == 'torch':
        device = torch.device(device) if device is not None else out_device
        sims, idx = _torch_search(query_t, gallery_t, k, exclude_self, chunk_size, device)
    elif backend == 'faiss':
        sims, idx = _faiss_search(query_t, gallery_t, k, exclude_self, chunk_size, device)
    else:
        raise ValueError(f"knn: backend must be 'torch' or 'faiss', got {backend!r}.")

    if as_tensor:
        return sims.to(out_device), idx.to(out_device)
    return sims.cpu().numpy(), idx.cpu().numpy()


def _stable_topk(sims: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Top ``k`` of each row, decreasing; ties go to the lower column index."""
    if k == sims.shape[1]:
        return _stable_order(sims, torch.arange(k, device=sims.device).expand_as(sims))
    # One extra column shows whether values equal to the k-th one straddle
    # the cut, where torch.topk's choice among them is arbitrary.
    vals, idx = torch.topk(sims, k + 1, dim=1)
    straddle = vals[:, k - 1] == vals[:, k]
    vals, idx = vals[:, :k], idx[:, :k]
    kth = vals[:, -1:]
    if bool(straddle.any()):
        # Everything above the k-th value plus the lowest-indexed ties:
        # O(rows x N), no sort of the whole row.
        rows = straddle.nonzero().squeeze(1)
        sub, sub_kth = sims[rows], kth[rows]
        above = sub > sub_kth
        ties = sub == sub_kth
        need = k - above.sum(dim=1, keepdim=True)
        chosen = above | (ties & (torch.cumsum(ties, dim=1, dtype=torch.int32) <= need))
        # nonzero() is row-major: k column indices per row, increasing.
        sub_idx = chosen.nonzero()[:, 1].view(-1, k)
        idx[rows] = sub_idx
        vals[rows] = sub.gather(1, sub_idx)
    return _stable_order(vals, idx)


def _search_rows(query: torch.Tensor, gallery: torch.Tensor, k: int,
                 self_index: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of a few query rows; ``self_index[r]`` is excluded from row r."""
    sims = query @ gallery.T
    if self_index is not None:
        sims[torch.arange(len(sims), device=sims.device), self_index] = float('-inf')
    return _stable_topk(sims, k)


def _torch_search(query, gallery, k, exclude_self, chunk_size, device):
    gallery = gallery.to(device)
    nq = query.shape[0]
    sims = torch.empty(nq, k, dtype=torch.float32, device=device)
    idx = torch.empty(nq, k, dtype=torch.long, device=device)
    for start in range(0, nq, chunk_size):
        stop = min(start + chunk_size, nq)
        self_index = torch.arange(start, stop, device=device) if exclude_self else None
        sims[start:stop], idx[start:stop] = _search_rows(
            query[start:stop].to(device), gallery, k, self_index)
    return sims, idx


def import_faiss():
    try:
        import faiss
    except ImportError as e:
        raise ImportError("knn(backend='faiss') needs faiss: pip install faiss-cpu "
                          "(or faiss-gpu-cu12 for search on a GPU).") from e
    return faiss


def _faiss_search(query, gallery, k, exclude_self, chunk_size, device):
    faiss = import_faiss()
    query_np = query.cpu().numpy()
    gallery_np = np.ascontiguousarray(gallery.cpu().numpy())
    n = gallery_np.shape[0]
    # One extra neighbour shows whether ties straddle the cut (and one more
    # to make room for the query itself when it is excluded).
    k_search = min(k + 1 + int(exclude_self), n)

    index = faiss.IndexFlatIP(gallery_np.shape[1])
    device = torch.device(device) if device is not None else torch.device('cpu')
    if device.type == 'cuda':
        if not hasattr(faiss, 'StandardGpuResources') or faiss.get_num_gpus() == 0:
            warnings.warn('knn: faiss has no GPU support here (install faiss-gpu-cu12); '
                          'searching on the CPU.')
        elif k_search > _FAISS_GPU_MAX_K:
            warnings.warn(f'knn: faiss-gpu returns at most {_FAISS_GPU_MAX_K} neighbours, '
                          f'{k_search} are needed; searching on the CPU.')
        else:
            resources = faiss.StandardGpuResources()
            index = faiss.index_cpu_to_gpu(resources, device.index or 0, index)
    index.add(gallery_np)

    nq = query_np.shape[0]
    sims = np.empty((nq, k), dtype=np.float32)
    idx = np.empty((nq, k), dtype=np.int64)
    gallery_t = torch.from_numpy(gallery_np)
    for start in range(0, nq, chunk_size):
        stop = min(start + chunk_size, nq)
        d, i = index.search(np.ascontiguousarray(query_np[start:stop]), k_search)
        rows = np.arange(stop - start)
        if exclude_self:
            drop = i == np.arange(start, stop)[:, None]
            drop[~drop.any(axis=1), -1] = True  # self not found: drop the last
            d = d[~drop].reshape(len(rows), -1)
            i = i[~drop].reshape(len(rows), -1)
        if d.shape[1] > k:
            # Equal similarities across the cut: faiss's choice among them is
            # arbitrary, so those rows are redone exactly.
            straddle = rows[d[:, k - 1] == d[:, k]]
            if len(straddle):
                self_index = torch.from_numpy(straddle + start) if exclude_self else None
                v, j = _search_rows(torch.from_numpy(query_np[start + straddle]),
                                    gallery_t, k, self_index)
                d[straddle, :k], i[straddle, :k] = v.numpy(), j.numpy()
        v, j = _stable_order(torch.from_numpy(d[:, :k].copy()), torch.from_numpy(i[:, :k].copy()))
        sims[start:stop], idx[start:stop] = v.numpy(), j.numpy()
    return torch.from_numpy(sims), torch.from_numpy(idx)


def _stable_order(vals: torch.Tensor, idx: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by decreasing value, equal values by increasing index."""
    idx, perm = idx.sort(dim=1)
    vals = vals.gather(1, perm)
    vals, perm = vals.sort(dim=1, descending=True, stable=True)
    return vals, idx.gather(1, perm)
