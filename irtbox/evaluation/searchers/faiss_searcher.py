"""Search with faiss: exact (``'Flat'``) or approximate (any factory string), CPU or GPU."""
import warnings
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import numpy as np
import torch

from irtbox.registry import SEARCHERS
from irtbox.utils.checks import check_positive_int
from ..functional.ranking import auto_chunk_size, stable_order, stable_topk
from .base import Device, NeighbourBlock, Searcher
from .faiss_index import (FAISS_GPU_MAX_K, build_index, has_ivf, set_search_parameter, to_gpu,
                          train_index)

__all__ = ['FaissSearcher', 'DEFAULT_NPROBE']

# IVF lists visited per query when nprobe is not given (faiss's own default, 1, misses
# most neighbours of any index with more than a few lists).
DEFAULT_NPROBE = 16


@SEARCHERS.register_module()
@dataclass(frozen=True)
class FaissSearcher(Searcher):
    """The top k by inner product from a faiss index built from a factory string.

    ``factory='Flat'`` (``IndexFlatIP``) is exact and gives the results of
    :class:`~irtbox.evaluation.searchers.ExactSearcher`: where equal similarities straddle
    the k-th place (faiss's choice among them is arbitrary) the row is redone exactly.
    Any other factory string (``'IVF4096,Flat'``, ``'IVF1024,PQ32'``, ``'HNSW32'``,
    ``'PCA128,IVF256,Flat'``, ...) is approximate: the index is trained on the gallery when
    its type needs it and a query gets what the index returns (-1 past what it found).
    Either way the returned items are ordered by decreasing similarity, equal ones by
    increasing index.

    Args:
        factory: the faiss factory string (its comma-separated parts as a list are joined:
            that is what ``--cfg-options test_evaluator.search.factory=IVF4096,Flat`` gives).
        nprobe: IVF lists visited per query (an index with lists: default 16); an index
            without lists refuses one.
        ef_search: HNSW's search breadth (default: faiss's); other indexes refuse one.
        chunk_size: queries per faiss call; ``None``: as many as
            :class:`~irtbox.evaluation.searchers.ExactSearcher` puts in a block.
        device: ``'cuda'`` (the current CUDA device) or ``'cuda:N'`` puts the index on that
            GPU when faiss has GPU support (else it stays on the CPU with a warning, as an
            index type faiss has no GPU version of, HNSW or plain PQ, does); ``None``:
            the CPU.
        gpu_temp_memory: bytes of scratch memory faiss reserves on the GPU (default:
            faiss's own).
    """
    factory: str = 'Flat'
    nprobe: Optional[int] = None
    ef_search: Optional[int] = None
    chunk_size: Optional[int] = None
    device: Device = None
    gpu_temp_memory: Optional[int] = None

    def __post_init__(self):
        if isinstance(self.factory, (list, tuple)):
            object.__setattr__(self, 'factory', ','.join(map(str, self.factory)))
        try:
            if not isinstance(self.factory, str) or not self.factory:
                raise ValueError("factory must be a faiss factory string such as 'Flat' or "
                                 f"'IVF1024,Flat', got {self.factory!r}.")
            for name in ('nprobe', 'ef_search', 'chunk_size', 'gpu_temp_memory'):
                check_positive_int(getattr(self, name), name, allow_none=True)
        except ValueError as err:  # the class is where a config's search setting fails
            raise ValueError(f'{type(self).__name__}: {err}') from None

    @property
    def exact(self) -> bool:
        return self.factory == 'Flat'

    def new_index(self, dim: int):
        """An empty CPU index of ``dim``-d vectors (a ValueError names a bad factory)."""
        return build_index(self.factory, dim)

    def build(self, vectors: np.ndarray, max_k: Optional[int] = None):
        """An index holding ``vectors`` (N x D float32), trained on them when its type needs
        it, with the search parameters, on the device (:meth:`place`)."""
        index = self.new_index(vectors.shape[1])
        train_index(index, vectors, self.factory)
        index = self.place(index, max_k)
        index.add(vectors)
        return index

    def place(self, index, max_k: Optional[int] = None):
        """The CPU index ``index`` with nprobe / efSearch set, on the searcher's device.

        The parameters are set on the CPU, where a wrong one gets a clear error; the move
        to the GPU carries them. ``max_k``: the most neighbours a search will ask for; past
        what faiss-gpu returns the index stays on the CPU, with a warning.
        """
        nprobe = DEFAULT_NPROBE if self.nprobe is None and has_ivf(index) else self.nprobe
        for name, value in (('nprobe', nprobe), ('efSearch', self.ef_search)):
            if value is not None:
                set_search_parameter(index, name, value)
        if max_k is not None and max_k > FAISS_GPU_MAX_K and self.device is not None \
                and torch.device(self.device).type == 'cuda':
            warnings.warn(f'FaissSearcher: faiss-gpu returns at most {FAISS_GPU_MAX_K} '
                          f'neighbours, {max_k} are needed; searching on the CPU.')
            return index
        return to_gpu(index, self.device, self.gpu_temp_memory, self.factory)

    def search(self, query: torch.Tensor, gallery: torch.Tensor, k: int,
               self_ids: Optional[np.ndarray] = None) -> Iterator[NeighbourBlock]:
        query_np = query.detach().cpu().numpy().astype(np.float32, copy=False)
        gallery_np = np.ascontiguousarray(gallery.detach().cpu().numpy(), dtype=np.float32)
        n = gallery_np.shape[0]
        # One more neighbour makes room for the query's own item (dropped); with the exact
        # index one more shows whether equal similarities straddle the cut.
        k_search = min(k + int(self.exact) + int(self_ids is not None), n)
        index = self.build(gallery_np, k_search)
        chunk_size = auto_chunk_size(self.chunk_size, n)
        for start in range(0, query_np.shape[0], chunk_size):
            stop = min(start + chunk_size, query_np.shape[0])
            d, i = index.search(np.ascontiguousarray(query_np[start:stop]), k_search)
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
    """Redo exactly, in place, the rows whose k-th and (k+1)-th similarities are equal:
    which of those tied items faiss kept is arbitrary, the exact search keeps the lowest
    indices (:func:`~irtbox.evaluation.functional.ranking.stable_topk`)."""
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
