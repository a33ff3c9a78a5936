"""The one exact search of irtbox: similarities by inner product, chunked over queries.

Every place that searches (``knn``, ``retrieval_metrics``, the revisited Oxford / Paris
ranking, αQE / αDBA, ``ImageSearcher``'s exact reference) goes through this module, so the
conventions are decided once:

- rows are queries; ``chunk_size`` queries are searched at once, so the largest temporary
  is chunk x N and nothing nq x N (or nq x k) is ever kept here;
- equal similarities: the lower gallery index first, both in the order and in the choice
  of which tied items make a top-k;
- leave-one-out by index: query i is gallery item i and is left out of its own search
  (its similarity is set to -inf), which exact duplicates cannot break.

Results are yielded chunk by chunk, so a caller consumes and drops them.

The faiss helpers at the end of the module (placing an index on the GPU and back, setting
its search parameters) are the one implementation of that for irtbox: this module's faiss
search and ``irtbox.search``'s indexes both use them.
"""
import warnings
from typing import Callable, Iterator, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from .checks import ArrayLike, as_float_matrix, check_finite

__all__ = [
    'prepare_pair', 'auto_chunk_size', 'similarity_blocks', 'topk_blocks', 'stable_topk',
    'stable_order', 'rank_of', 'stable_ranks', 'approximate_topk_blocks', 'import_faiss',
    'FAISS_GPU_MAX_K', 'faiss_has_gpu', 'gpu_device_id', 'float16_lookup_tables', 'to_gpu',
    'on_gpu', 'to_cpu', 'set_search_parameter'
]

Device = Optional[Union[str, torch.device]]

# The similarity block of the default chunk size stays under this many bytes: the extra
# memory of a search is then flat in the number of queries and small at any gallery size.
_BLOCK_BYTES = 128 << 20
_MAX_AUTO_CHUNK = 4096
# faiss-gpu selects at most this many neighbours per query, and probes at most this many
# IVF lists.
FAISS_GPU_MAX_K = 2048
# IVF-PQ codes of this many bytes or more make float32 lookup tables larger than a GPU's
# shared memory; faiss-gpu then needs them in float16.
_FLOAT16_PQ_BYTES = 56


def import_faiss():
    """The faiss module, or an ImportError that says how to install it."""
    try:
        import faiss
    except ImportError as e:
        raise ImportError("search with backend='faiss' needs faiss: pip install faiss-cpu "
                          '(or faiss-gpu-cu12 for search on a GPU).') from e
    return faiss


def prepare_pair(query: ArrayLike,
                 gallery: ArrayLike,
                 owner: str,
                 normalize: bool,
                 names: Tuple[str, str] = ('query', 'gallery'),
                 keep_float64: bool = False,
                 role: str = 'gallery',
                 check_gallery: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Checked float tensors (nq x D, N x D) of one search.

    Errors name ``owner`` and the argument at fault (``role``: what the second one is
    called in the message for an empty one). With ``normalize`` rows are
    L2-normalised; when ``gallery`` is ``query`` (leave-one-out) that is done once and
    the two results are one tensor. With ``keep_float64`` float64 input stays float64 and
    both sides get the wider type. ``check_gallery=False`` skips the gallery's NaN / inf
    pass: the caller then gives ``checked`` to :func:`similarity_blocks`, which finds a bad
    gallery row in the similarities instead (a pass over the whole gallery costs ~10 % of
    a 70 x 1M search).
    """
    same = gallery is query
    query_t = as_float_matrix(query, names[0], owner, keep_float64)
    gallery_t = query_t if same else as_float_matrix(gallery, names[1], owner, keep_float64,
                                                     check=check_gallery)
    if query_t.shape[1] != gallery_t.shape[1]:
        raise ValueError(f'{owner}: {names[0]} has dimension {query_t.shape[1]} but '
                         f'{names[1]} has {gallery_t.shape[1]}; expected the same embedding '
                         'size.')
    if gallery_t.shape[0] == 0:
        raise ValueError(f'{owner}: the {role} is empty ({names[1]} has no rows); expected at '
                         'least one item.')
    if normalize:
        query_t = F.normalize(query_t, dim=1)
        gallery_t = query_t if same else F.normalize(gallery_t, dim=1)
    if query_t.dtype != gallery_t.dtype:
        query_t, gallery_t = query_t.double(), gallery_t.double()
    return query_t, gallery_t


def auto_chunk_size(chunk_size: Optional[int], n_gallery: int, owner: str,
                    block_bytes: int = _BLOCK_BYTES) -> int:
    """``chunk_size`` checked, or for ``None`` the most queries whose float32 similarity
    block (chunk x ``n_gallery``) fits in ``block_bytes`` (128 MB; at most 4096 rows)."""
    if chunk_size is None:
        return int(max(1, min(_MAX_AUTO_CHUNK, block_bytes // (4 * max(1, n_gallery)))))
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f'{owner}: chunk_size must be a positive integer, got {chunk_size!r}.')
    return int(chunk_size)


def similarity_blocks(query: torch.Tensor,
                      gallery: torch.Tensor,
                      chunk_size: int,
                      device: Device = None,
                      exclude_self: bool = False,
                      checked: Optional[Tuple[str, str]] = None
                      ) -> Iterator[Tuple[int, torch.Tensor]]:
    """Inner products of ``chunk_size`` queries at a time with the whole gallery.

    Every block is written into one buffer: a fresh chunk x N tensor per block would be
    returned to the system and page-faulted in again each time (~10 % of the product's
    time on a CPU). So a block is valid until the next one is yielded.

    Args:
        query: nq x D tensor; gallery: N x D tensor of the same dtype (e.g. from
            :func:`prepare_pair`).
        chunk_size: query rows per block.
        device: where the products are computed (default: the query's device).
        exclude_self: query i is gallery item i; its own similarity is -inf.
        checked: ``(owner, gallery name)`` when the gallery was not checked for NaN / inf
            (:func:`prepare_pair` with ``check_gallery=False``; the query must have been):
            each block is checked instead, since a non-finite gallery row makes its whole
            column non-finite, and the error names the gallery.

    Yields:
        ``(start, sims)``: sims is (rows x N) on ``device`` for queries
        ``start .. start + rows - 1``.
    """
    device = torch.device(device) if device is not None else query.device
    gallery = gallery.to(device)
    nq = query.shape[0]
    buffer = torch.empty(min(chunk_size, nq), gallery.shape[0], dtype=gallery.dtype,
                         device=device)
    for start in range(0, nq, chunk_size):
        rows = min(chunk_size, nq - start)
        sims = torch.matmul(query[start:start + rows].to(device), gallery.T, out=buffer[:rows])
        if checked is not None:
            _check_block(sims, gallery, *checked)
        if exclude_self:
            diagonal = torch.arange(rows, device=device)
            sims[diagonal, diagonal + start] = float('-inf')
        yield start, sims


def _check_block(sims: torch.Tensor, gallery: torch.Tensor, owner: str, name: str) -> None:
    """The error of a non-finite similarity: the gallery's (found by the usual check), or an
    overflow of finite inputs."""
    low, high = (float(v) for v in torch.aminmax(sims))
    if np.isfinite(low) and np.isfinite(high):
        return
    check_finite(gallery, name, owner)
    raise ValueError(f'{owner}: inner products overflow {str(sims.dtype)[6:]} (NaN or inf from '
                     'finite embeddings); expected embeddings of moderate norm, e.g. '
                     'L2-normalised.')


def topk_blocks(query: torch.Tensor,
                gallery: torch.Tensor,
                k: int,
                chunk_size: int,
                backend: str = 'torch',
                device: Device = None,
                exclude_self: bool = False
                ) -> Iterator[Tuple[int, torch.Tensor, torch.Tensor]]:
    """The exact top ``k`` gallery items of each query, a chunk of queries at a time.

    Args:
        query, gallery: nq x D and N x D float32 tensors (:func:`prepare_pair`).
        k: neighbours per query, at most N (N - 1 with ``exclude_self``).
        chunk_size: queries per chunk.
        backend: ``'torch'`` (matrix product + :func:`stable_topk`) or ``'faiss'``
            (``IndexFlatIP``, exact; on a GPU when ``device`` is CUDA and faiss has GPU
            support).
        device: where to compute (torch default: the query's device; faiss: CPU).
        exclude_self: leave-one-out by index (nq == N).

    Yields:
        ``(start, sims, idx)``: rows x k float32 and int64 tensors (CPU for faiss, on
        ``device`` for torch), by decreasing similarity, ties to the lower index.
    """
    if backend == 'torch':
        for start, sims in similarity_blocks(query, gallery, chunk_size, device, exclude_self):
            yield (start, ) + stable_topk(sims, k)
    elif backend == 'faiss':
        yield from _faiss_topk_blocks(query, gallery, k, chunk_size, device, exclude_self)
    else:
        raise ValueError(f"search: backend must be 'torch' or 'faiss', got {backend!r}.")


def stable_topk(sims: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Top ``k`` of each row of ``sims`` (rows x N), decreasing; ties to the lower column.

    Returns:
        (values, columns), each rows x k.
    """
    if k == sims.shape[1]:
        return stable_order(sims, torch.arange(k, device=sims.device).expand_as(sims))
    # One extra column shows whether values equal to the k-th one straddle the cut, where
    # torch.topk's choice among them is arbitrary.
    vals, idx = torch.topk(sims, k + 1, dim=1)
    straddle = vals[:, k - 1] == vals[:, k]
    vals, idx = vals[:, :k], idx[:, :k]
    if bool(straddle.any()):
        # Everything above the k-th value plus the lowest-indexed ties: O(rows x N), no
        # sort of the whole row.
        rows = straddle.nonzero().squeeze(1)
        sub, kth = sims[rows], vals[rows, -1:]
        above = sub > kth
        ties = sub == kth
        need = k - above.sum(dim=1, keepdim=True)
        chosen = above | (ties & (torch.cumsum(ties, dim=1, dtype=torch.int32) <= need))
        # nonzero() is row-major: k column indices per row, increasing.
        sub_idx = chosen.nonzero()[:, 1].view(-1, k)
        idx[rows] = sub_idx
        vals[rows] = sub.gather(1, sub_idx)
    return stable_order(vals, idx)


def stable_order(vals: torch.Tensor, idx: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by decreasing value, equal values by increasing index."""
    idx, perm = idx.sort(dim=1)
    vals = vals.gather(1, perm)
    vals, perm = vals.sort(dim=1, descending=True, stable=True)
    return vals, idx.gather(1, perm)


def rank_of(sims: torch.Tensor, value: torch.Tensor, key: torch.Tensor,
            keys_of: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> torch.Tensor:
    """0-based rank of one item per row in the order of :func:`stable_topk`, by counting.

    The item of similarity ``value`` and tie-break key ``key`` has rank
    #(s > value) + #(s == value and key' < key); no row is sorted.

    Args:
        sims: rows x N similarities.
        value, key: (rows,) the item's similarity and key in each row.
        keys_of: the keys of every column of some rows (given their row numbers), asked
            only for rows where other items share the value exactly; default: the columns
            (ties to the lower column).

    Returns:
        (rows,) int64 ranks.
    """
    value = value[:, None]
    greater = (sims > value).sum(dim=1, dtype=torch.int32)
    at_least = (sims >= value).sum(dim=1, dtype=torch.int32)
    ranks = greater.long()
    # Rare: other items share the value exactly; those of lower key come first.
    tied = (at_least - greater > 1).nonzero().squeeze(1)
    if len(tied):
        keys = torch.arange(sims.shape[1], device=sims.device) if keys_of is None \
            else keys_of(tied)
        before = (sims[tied] == value[tied]) & (keys < key[tied, None])
        ranks[tied] += before.sum(dim=1)
    return ranks


def stable_ranks(scores: np.ndarray, items: np.ndarray) -> np.ndarray:
    """0-based positions of ``items`` in the ranking of ``scores``, without ranking it.

    The ranking is by decreasing score, equal scores by increasing index (a stable
    descending sort, as :func:`~irtbox.evaluation.functional.rank_database`). The
    position of item x with score t is #(s > t) + #(s == t and index < x). Only the scores
    at or above the lowest item score matter; those are sorted (values only, no indices:
    a fraction of an argsort of the row) and each item's count is a ``searchsorted``.

    Args:
        scores: (N,) float scores of one query against the database.
        items: (m,) distinct int64 database indices.

    Returns:
        (m,) int64 positions, in the order of ``items``.
    """
    if len(items) == 0:
        return np.zeros(0, dtype=np.int64)
    t = scores[items]
    above = np.sort(scores[scores >= t.min()])
    right = np.searchsorted(above, t, side='right')
    greater = len(above) - right
    equal = right - np.searchsorted(above, t, side='left')
    # Ties among the items themselves: the lower index first.
    order = np.lexsort((items, -t))
    group_start = np.r_[0, np.flatnonzero(np.diff(t[order]) != 0) + 1]
    sizes = np.diff(np.r_[group_start, len(items)])
    tie_rank, items_equal = np.empty((2, len(items)), dtype=np.int64)
    tie_rank[order] = np.arange(len(items)) - np.repeat(group_start, sizes)
    items_equal[order] = np.repeat(sizes, sizes)
    ranks = greater + tie_rank
    # Rare: a database entry outside ``items`` has exactly an item's score; count it by index.
    for j in np.flatnonzero(equal != items_equal):
        tied = np.flatnonzero(scores == t[j])
        ranks[j] = greater[j] + np.count_nonzero(tied < items[j])
    return ranks


def approximate_topk_blocks(query: torch.Tensor,
                            gallery: torch.Tensor,
                            k: int,
                            chunk_size: int,
                            index: str,
                            nprobe: Optional[int] = None,
                            ef_search: Optional[int] = None,
                            exclude_self: bool = False
                            ) -> Iterator[Tuple[int, torch.Tensor, torch.Tensor]]:
    """An approximate top ``k`` from any faiss index (CPU), a chunk of queries at a time.

    For galleries too large for exact search: the index is built from the factory string
    ``index`` (e.g. ``'IVF4096,Flat'``, ``'HNSW32'``, ``'IVF1024,PQ32'``) by inner product,
    trained on the gallery when it needs training, and searched with ``nprobe`` (IVF) or
    ``ef_search`` (HNSW). Missing neighbours are index -1 (similarity -inf).

    Args:
        query, gallery: nq x D and N x D float32 tensors (:func:`prepare_pair`).
        k: neighbours per query.
        chunk_size: queries per chunk.
        index: a faiss factory string.
        nprobe, ef_search: search parameters (``None``: faiss's default).
        exclude_self: leave-one-out by index (nq == N).

    Yields:
        ``(start, sims, idx)`` as :func:`topk_blocks`, CPU tensors.
    """
    faiss = import_faiss()
    gallery_np = np.ascontiguousarray(gallery.cpu().numpy())
    try:
        built = faiss.index_factory(gallery_np.shape[1], index, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise ValueError(f'search: faiss cannot build index {index!r} for '
                         f'{gallery_np.shape[1]}-d vectors: {err}') from err
    if not built.is_trained:
        built.train(gallery_np)
    built.add(gallery_np)
    for name, value in (('nprobe', nprobe), ('efSearch', ef_search)):
        if value is not None:
            set_search_parameter(built, name, value)
    query_np = query.cpu().numpy()
    k_search = min(k + int(exclude_self), gallery_np.shape[0])
    for start in range(0, query_np.shape[0], chunk_size):
        stop = min(start + chunk_size, query_np.shape[0])
        d, i = built.search(np.ascontiguousarray(query_np[start:stop]), k_search)
        if exclude_self:
            drop = i == np.arange(start, stop)[:, None]
            drop[~drop.any(axis=1), -1] = True  # self not found: drop the last
            d = d[~drop].reshape(stop - start, -1)
            i = i[~drop].reshape(stop - start, -1)
        d[i < 0] = -np.inf
        yield start, torch.from_numpy(d[:, :k]), torch.from_numpy(i[:, :k])


def _faiss_topk_blocks(query, gallery, k, chunk_size, device, exclude_self):
    faiss = import_faiss()
    query_np = query.cpu().numpy()
    gallery_np = np.ascontiguousarray(gallery.cpu().numpy())
    n = gallery_np.shape[0]
    # One extra neighbour shows whether ties straddle the cut (and one more to make room
    # for the query itself when it is excluded).
    k_search = min(k + 1 + int(exclude_self), n)
    index = faiss.IndexFlatIP(gallery_np.shape[1])
    device = torch.device(device) if device is not None else torch.device('cpu')
    if device.type == 'cuda':
        if not faiss_has_gpu():
            warnings.warn('search: faiss has no GPU support here (install faiss-gpu-cu12); '
                          'searching on the CPU.')
        elif k_search > FAISS_GPU_MAX_K:
            warnings.warn(f'search: faiss-gpu returns at most {FAISS_GPU_MAX_K} neighbours, '
                          f'{k_search} are needed; searching on the CPU.')
        else:
            index = to_gpu(index, device)
    index.add(gallery_np)
    gallery_t = torch.from_numpy(gallery_np)
    for start in range(0, query_np.shape[0], chunk_size):
        stop = min(start + chunk_size, query_np.shape[0])
        d, i = index.search(np.ascontiguousarray(query_np[start:stop]), k_search)
        rows = np.arange(stop - start)
        if exclude_self:
            drop = i == np.arange(start, stop)[:, None]
            drop[~drop.any(axis=1), -1] = True  # self not found: drop the last
            d = d[~drop].reshape(len(rows), -1)
            i = i[~drop].reshape(len(rows), -1)
        if d.shape[1] > k:
            # Equal similarities across the cut: faiss's choice among them is arbitrary,
            # so those rows are redone exactly.
            straddle = rows[d[:, k - 1] == d[:, k]]
            if len(straddle):
                sims = torch.from_numpy(query_np[start + straddle]) @ gallery_t.T
                if exclude_self:
                    sims[torch.arange(len(straddle)), torch.from_numpy(start + straddle)] = \
                        float('-inf')
                v, j = stable_topk(sims, k)
                d[straddle, :k], i[straddle, :k] = v.numpy(), j.numpy()
        d, i = torch.from_numpy(d[:, :k].copy()), torch.from_numpy(i[:, :k].copy())
        # faiss sorts by decreasing similarity; only rows with equal values need their
        # ties put in index order.
        tied = (d[:, 1:] == d[:, :-1]).any(dim=1).nonzero().squeeze(1)
        if len(tied):
            d[tied], i[tied] = stable_order(d[tied], i[tied])
        yield start, d, i


def faiss_has_gpu() -> bool:
    """Whether faiss was built with GPU support and sees a GPU."""
    faiss = import_faiss()
    return hasattr(faiss, 'StandardGpuResources') and faiss.get_num_gpus() > 0


def gpu_device_id(device: Device) -> int:
    """The number of CUDA ``device``; for a bare ``'cuda'`` the process's current device
    (under a distributed launcher, the local rank's), not GPU 0."""
    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


def float16_lookup_tables(index) -> bool:
    """Whether faiss-gpu needs float16 lookup tables for the CPU index ``index``: an IVF-PQ
    index with codes of 56 bytes or more, whose float32 tables exceed a GPU's shared memory
    (faiss refuses to move it otherwise)."""
    faiss = import_faiss()
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return False
    ivf = faiss.downcast_index(ivf)
    return isinstance(ivf, faiss.IndexIVFPQ) and ivf.pq.code_size >= _FLOAT16_PQ_BYTES


def to_gpu(index, device: Device, temp_memory: Optional[int] = None,
           name: Optional[str] = None):
    """The CPU index ``index`` on ``device`` when that is a CUDA device and faiss has GPU
    support; otherwise ``index`` itself.

    Search parameters already set (``nprobe``) move with it. An index faiss cannot put on a
    GPU (HNSW and plain PQ have no GPU version; an nprobe above :data:`FAISS_GPU_MAX_K`)
    stays on the CPU, with a warning that says why.

    Args:
        index: a CPU faiss index.
        device: e.g. ``'cuda'`` (the current CUDA device), ``'cuda:1'``, ``'cpu'``.
        temp_memory: bytes of scratch memory faiss reserves on the GPU (``None``: faiss's
            default).
        name: what the warning calls the index, e.g. its factory string (default: its
            class).
    """
    if device is None or torch.device(device).type != 'cuda' or not faiss_has_gpu():
        return index
    faiss = import_faiss()
    resources = faiss.StandardGpuResources()
    if temp_memory is not None:
        resources.setTempMemory(int(temp_memory))
    options = faiss.GpuClonerOptions()
    options.useFloat16 = float16_lookup_tables(index)
    try:
        return faiss.index_cpu_to_gpu(resources, gpu_device_id(device), index, options)
    except RuntimeError as err:
        name = name or type(faiss.downcast_index(index)).__name__
        warnings.warn(f'faiss cannot put index {name} on the GPU ({err}); it stays on the '
                      'CPU.')
        return index


def on_gpu(index) -> bool:
    """Whether any part of ``index`` is on a GPU: the index itself, or one inside a wrapper
    (``IndexPreTransform``, ``IndexIDMap``, ``IndexRefine``), which keeps its CPU class."""
    faiss = import_faiss()
    if not hasattr(faiss, 'GpuIndex'):
        return False
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.GpuIndex):
        return True
    inner = (getattr(index, name, None) for name in ('index', 'base_index', 'refine_index'))
    return any(on_gpu(part) for part in inner if part is not None)


def to_cpu(index):
    """``index`` on the CPU (what faiss can write to a file): a CPU copy of an index with
    any part on a GPU, a CPU index itself."""
    return import_faiss().index_gpu_to_cpu(index) if on_gpu(index) else index


def set_search_parameter(index, name: str, value: int) -> None:
    """Set the search parameter ``name`` (``'nprobe'``, ``'efSearch'``) of ``index``, on the
    CPU or a GPU, through wrappers such as ``IndexPreTransform``.

    faiss's ``ParameterSpace`` does not reach GPU IVF indexes; ``GpuParameterSpace`` (in a
    faiss with GPU support) does, and sets everything else as ``ParameterSpace`` does.

    Raises:
        ValueError: ``value`` is not a positive integer; ``index`` has no such parameter
            (e.g. nprobe of a Flat or HNSW index); an nprobe above what faiss-gpu probes on
            a GPU index.
    """
    faiss = import_faiss()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f'faiss search parameter {name} must be a positive integer, got '
                         f'{value!r}.')
    if name == 'nprobe' and value > FAISS_GPU_MAX_K and on_gpu(index):
        raise ValueError(f'faiss-gpu probes at most {FAISS_GPU_MAX_K} IVF lists, got '
                         f'nprobe={value}; use a smaller nprobe or search on the CPU.')
    space = faiss.GpuParameterSpace() if hasattr(faiss, 'GpuParameterSpace') else \
        faiss.ParameterSpace()
    try:
        space.set_index_parameter(index, name, int(value))
    except RuntimeError as err:
        raise ValueError(f'faiss index {type(faiss.downcast_index(index)).__name__} has no '
                         f'search parameter {name}={value} (nprobe is one of IVF indexes, '
                         'efSearch of HNSW ones).') from err
