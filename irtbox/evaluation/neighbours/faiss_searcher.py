"""Search with faiss: exact (``'Flat'``) or approximate (any factory string), CPU or GPU."""
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import numpy as np
import torch

from irtbox.registry import SEARCHERS
from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import with_prefix
from ..functional.ranking import auto_chunk_size, stable_order, stable_topk
from .base import Device, NeighbourBlock, Searcher
from .faiss_index import FaissIndex
from .index import search_reranked

__all__ = ['FaissSearcher']


@SEARCHERS.register_module()
@dataclass(frozen=True)
class FaissSearcher(Searcher):
    """The top k by inner product from a faiss index built from a factory string
    (a :class:`~irtbox.evaluation.neighbours.faiss_index.FaissIndex` of the gallery).

    ``factory='Flat'`` is exact and gives the results of
    :class:`~irtbox.evaluation.neighbours.ExactSearcher` (a row where equal similarities
    straddle the k-th place, faiss's choice among them arbitrary, is redone exactly). Any
    other factory string is approximate (-1 past what the index found). Either way equal
    similarities are ordered by increasing index.

    Args:
        factory, nprobe, ef_search, device, gpu_temp_memory: the ``FaissIndex``'s.
        chunk_size: queries per faiss call; ``None``: as many as ``ExactSearcher``'s block.
        k_factor: an approximate index's ``k_factor`` x k candidates are re-ranked exactly
            against the gallery (1: none).
    """
    factory: str = 'Flat'
    nprobe: Optional[int] = None
    ef_search: Optional[int] = None
    chunk_size: Optional[int] = None
    device: Device = None
    gpu_temp_memory: Optional[int] = None
    k_factor: int = 1

    def __post_init__(self):
        try:
            # The index's own checks, once, where a config's search setting fails.
            object.__setattr__(self, 'factory', self.new_index().factory)
            check_positive_int(self.chunk_size, 'chunk_size', allow_none=True)
            check_positive_int(self.k_factor, 'k_factor')
        except ValueError as err:
            raise with_prefix(err, type(self).__name__) from None

    @property
    def exact(self) -> bool:
        return self.factory == 'Flat'

    def new_index(self) -> FaissIndex:
        """An empty :class:`FaissIndex` of these settings."""
        return FaissIndex(self.factory, nprobe=self.nprobe, ef_search=self.ef_search,
                          device=self.device, gpu_temp_memory=self.gpu_temp_memory)

    def search(self, query: torch.Tensor, gallery: torch.Tensor, k: int,
               self_ids: Optional[np.ndarray] = None) -> Iterator[NeighbourBlock]:
        query_np = query.detach().cpu().numpy().astype(np.float32, copy=False)
        gallery_np = np.ascontiguousarray(gallery.detach().cpu().numpy(), dtype=np.float32)
        n = gallery_np.shape[0]
        # One more neighbour makes room for the query's own item (dropped); with the exact
        # index one more shows whether equal similarities straddle the cut.
        k_search = min(k + int(self.exact) + int(self_ids is not None), n)
        index = self.new_index()
        index.add(gallery_np)
        chunk_size = auto_chunk_size(self.chunk_size, n)
        for start in range(0, query_np.shape[0], chunk_size):
            stop = min(start + chunk_size, query_np.shape[0])
            chunk = np.ascontiguousarray(query_np[start:stop])
            d, i = search_reranked(index, gallery_np, chunk, k_search,
                                   1 if self.exact else self.k_factor)
            own = None if self_ids is None else np.asarray(self_ids[start:stop])
            if own is not None:
                d, i = _drop_own(d, i, own)
            if self.exact and d.shape[1] > k:
                _redo_straddling_ties(d, i, k, query_np[start:stop], gallery_np, own)
            d, i = d[:, :k].copy(), i[:, :k].copy()
            d[i < 0] = -np.inf
            yield NeighbourBlock(start, *_ties_by_index(torch.from_numpy(d),
                                                        torch.from_numpy(i)))


def _drop_own(d: np.ndarray, i: np.ndarray, own: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Each row without its query's own item ``own`` (or, where it was not returned,
    without its last column): rows x (k_search - 1)."""
    drop = i == own[:, None]
    drop[~drop.any(axis=1), -1] = True
    rows = len(i)
    return d[~drop].reshape(rows, -1), i[~drop].reshape(rows, -1)


def _redo_straddling_ties(d: np.ndarray, i: np.ndarray, k: int, query: np.ndarray,
                          gallery: np.ndarray, own: Optional[np.ndarray]) -> None:
    """Redo exactly, in place, the rows whose k-th and (k+1)-th similarities are equal (which
    tied items faiss kept is arbitrary; the exact search keeps the lowest indices)."""
    straddle = np.flatnonzero(d[:, k - 1] == d[:, k])
    if not len(straddle):
        return
    sims = torch.from_numpy(query[straddle]) @ torch.from_numpy(gallery).T
    if own is not None:
        sims[torch.arange(len(straddle)), torch.from_numpy(own[straddle])] = float('-inf')
    values, ids = stable_topk(sims, k)
    d[straddle, :k], i[straddle, :k] = values.numpy(), ids.numpy()


def _ties_by_index(d: torch.Tensor, i: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """faiss sorts by decreasing similarity; only rows with equal values need their ties
    put in index order."""
    tied = (d[:, 1:] == d[:, :-1]).any(dim=1).nonzero().squeeze(1)
    if len(tied):
        d[tied], i[tied] = stable_order(d[tied], i[tied])
    return d, i
