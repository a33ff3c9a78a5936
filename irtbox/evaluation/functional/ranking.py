"""The exact, tie-stable ranking core: every exact search of irtbox (the metrics, the revisited
ranking, tuple mining, the index's re-ranking and recall references) goes through it, so the
conventions are decided once:

- rows are queries; ``chunk_size`` queries are searched at once, so the largest temporary
  is chunk x N; a gallery too large to hold is read in blocks (:func:`blockwise_topk`);
- equal similarities: the lower gallery index first, in the order, in the choice of which
  tied items make a top-k, and in a counted rank.
"""
from typing import Callable, Iterator, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError
from .checks import ArrayLike, as_float_matrix, check_finite

__all__ = [
    'prepare_pair', 'auto_chunk_size', 'similarity_blocks', 'stable_topk', 'stable_order',
    'blockwise_topk', 'rank_of', 'stable_ranks'
]

Device = Optional[Union[str, torch.device]]

# The similarity block of the default chunk size stays under this many bytes: the extra
# memory of a search is then flat in the number of queries and small at any gallery size.
_BLOCK_BYTES = 128 << 20
_MAX_AUTO_CHUNK = 4096


def prepare_pair(query: ArrayLike,
                 gallery: ArrayLike,
                 normalize: bool,
                 names: Tuple[str, str] = ('query', 'gallery'),
                 keep_float64: bool = False,
                 role: str = 'gallery',
                 check_gallery: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Checked float tensors (nq x D, N x D) of one search.

    Errors name the argument at fault (``names``; ``role``: the second one's name in the
    message for an empty one). When ``gallery`` is ``query`` (leave-one-out) the two results
    are one tensor. ``check_gallery=False`` skips the gallery's NaN / inf pass (a pass over a
    large gallery: docs/benchmarks.md): the caller then gives ``checked`` to
    :func:`similarity_blocks`, which finds a bad row in the similarities instead.
    """
    same = gallery is query
    query_t = as_float_matrix(query, names[0], keep_float64)
    gallery_t = query_t if same else as_float_matrix(gallery, names[1], keep_float64,
                                                     check=check_gallery)
    if query_t.shape[1] != gallery_t.shape[1]:
        raise ArgumentError(f'{names[0]} has dimension {query_t.shape[1]} but {names[1]} has '
                            f'{gallery_t.shape[1]}; expected the same embedding size.', names[1])
    if gallery_t.shape[0] == 0:
        raise ArgumentError(f'the {role} is empty ({names[1]} has no rows); expected at least '
                            'one item.', names[1])
    if normalize:
        query_t = F.normalize(query_t, dim=1)
        gallery_t = query_t if same else F.normalize(gallery_t, dim=1)
    if query_t.dtype != gallery_t.dtype:
        query_t, gallery_t = query_t.double(), gallery_t.double()
    return query_t, gallery_t


def auto_chunk_size(chunk_size: Optional[int], n_gallery: int,
                    block_bytes: int = _BLOCK_BYTES) -> int:
    """``chunk_size`` checked, or for ``None`` the most queries (at most 4096) whose float32
    chunk x ``n_gallery`` block fits in ``block_bytes``."""
    if chunk_size is None:
        return int(max(1, min(_MAX_AUTO_CHUNK, block_bytes // (4 * max(1, n_gallery)))))
    return check_positive_int(chunk_size, 'chunk_size')


def similarity_blocks(query: torch.Tensor,
                      gallery: torch.Tensor,
                      chunk_size: int,
                      device: Device = None,
                      checked: Optional[str] = None
                      ) -> Iterator[Tuple[int, torch.Tensor]]:
    """Inner products of ``chunk_size`` queries at a time with the whole gallery.

    Every block is written into one buffer (a fresh chunk x N tensor per block would be
    page-faulted in again each time), so a block is valid until the next one is yielded.

    Args:
        query: nq x D; gallery: N x D of the same dtype.
        device: where the products are computed (default: the query's device).
        checked: the gallery's argument name when it was not checked for NaN / inf: each
            block is checked instead (a non-finite row makes its whole column non-finite).

    Yields:
        ``(start, sims)``: sims is rows x N on ``device`` for queries from ``start``.
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
            _check_block(sims, gallery, checked)
        yield start, sims


def _check_block(sims: torch.Tensor, gallery: torch.Tensor, name: str) -> None:
    """The error of a non-finite similarity: the gallery's (found by the usual check), or an
    overflow of finite inputs."""
    low, high = (float(v) for v in torch.aminmax(sims))
    if np.isfinite(low) and np.isfinite(high):
        return
    check_finite(gallery, name)
    raise ArgumentError(f'inner products overflow {str(sims.dtype)[6:]} (NaN or inf from the '
                        f'finite query embeddings and {name}); expected embeddings of '
                        'moderate norm, e.g. L2-normalised.', name)


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


def blockwise_topk(queries: np.ndarray, rows: np.ndarray, k: int, block_rows: int = 1 << 15,
                   read: Optional[Callable[[int, int], np.ndarray]] = None,
                   exclude: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The exact top ``k`` of the nq x D ``queries`` among the N x D ``rows`` by inner product,
    the rows read ``block_rows`` at a time (``read(start, stop)``): memory nq x
    (block_rows + 2k) whatever N is; ties to the lower row. ``exclude``: (nq,) a row each
    query leaves out (its own), or None.

    Returns:
        (nq x k float32 inner products, nq x k int64 rows), best first.
    """
    read = read or (lambda start, stop: rows[start:stop])
    query = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))
    own = None if exclude is None else torch.as_tensor(exclude, dtype=torch.long)
    best = torch.empty(len(query), 0), torch.empty(len(query), 0, dtype=torch.long)
    for start in range(0, len(rows), block_rows):
        sims = query @ torch.from_numpy(np.asarray(read(start, start + block_rows),
                                                   dtype=np.float32)).T
        if own is not None:
            inside = ((own >= start) & (own < start + sims.shape[1])).nonzero().squeeze(1)
            sims[inside, own[inside] - start] = float('-inf')
        scores, found = stable_topk(sims, min(k, sims.shape[1]))
        scores, found = stable_order(torch.cat([best[0], scores], 1),
                                     torch.cat([best[1], found + start], 1))
        best = scores[:, :k], found[:, :k]
    return best[0].numpy(), best[1].numpy()


def rank_of(sims: torch.Tensor, value: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
    """0-based rank of one item per row in the order of :func:`stable_topk`, by counting.

    The item of similarity ``value`` at ``column`` has rank
    #(s > value) + #(s == value and column' < column); no row is sorted.

    Args:
        sims: rows x N similarities.
        value, column: (rows,) the item's similarity and column in each row.

    Returns:
        (rows,) int64 ranks.
    """
    value = value[:, None]
    greater = (sims > value).sum(dim=1, dtype=torch.int32)
    at_least = (sims >= value).sum(dim=1, dtype=torch.int32)
    ranks = greater.long()
    # Rare: other items share the value exactly; those of lower column come first.
    tied = (at_least - greater > 1).nonzero().squeeze(1)
    if len(tied):
        columns = torch.arange(sims.shape[1], device=sims.device)
        before = (sims[tied] == value[tied]) & (columns < column[tied, None])
        ranks[tied] += before.sum(dim=1)
    return ranks


def stable_ranks(scores: np.ndarray, items: np.ndarray) -> np.ndarray:
    """0-based positions of ``items`` in the ranking of ``scores``, without ranking it.

    The ranking is by decreasing score, equal scores by increasing index. The position of
    item x with score t is #(s > t) + #(s == t and index < x): only the scores at or above
    the lowest item score are sorted (values only, cheaper than an argsort of the row).

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
