"""The one interface of a nearest-neighbour search by inner product: a frozen dataclass of
settings, registered in :data:`~irtbox.registry.SEARCHERS` (a config's ``search=dict(...)``),
whose blocks of results a metric consumes and drops."""
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Iterator, Optional, Union

import numpy as np
import torch

__all__ = ['NeighbourBlock', 'Searcher']

Device = Optional[Union[str, torch.device]]


@dataclass
class NeighbourBlock:
    """The top k gallery items of queries ``start .. start + rows - 1``.

    Attributes:
        start: the first query row of the block.
        scores: rows x k similarities, decreasing; -inf where ``ids`` is -1.
        ids: rows x k int64 gallery indices, equal similarities by increasing index; -1
            where an approximate index found fewer than k items.
        similarities: rows x N similarities to every gallery item (the query's own item at
            -inf in leave-one-out), from searchers whose ``exhaustive`` is True, else None:
            a rank beyond k is then counted in it. Valid until the next block is yielded.
    """
    start: int
    scores: torch.Tensor
    ids: torch.Tensor
    similarities: Optional[torch.Tensor] = None


class Searcher(ABC):
    """Nearest neighbours of query rows among gallery rows by inner product. Subclasses are frozen
    dataclasses with at least the fields ``chunk_size`` and ``device`` (``None``: the searcher's
    default), so that a metric can place a copy on its rank's device (``dataclasses.replace``).

    Class attributes:
        exhaustive: its blocks carry every gallery similarity (:attr:`NeighbourBlock.similarities`).
        gpu_when_available: with no ``device`` set, a metric runs it on its rank's GPU when
            CUDA is available (torch runs anywhere; faiss needs faiss-gpu).
    """
    exhaustive: ClassVar[bool] = False
    gpu_when_available: ClassVar[bool] = False
    chunk_size: Optional[int]
    device: Device

    @property
    @abstractmethod
    def exact(self) -> bool:
        """Whether the results are those of a full stable sort of every similarity."""

    @abstractmethod
    def search(self, query: torch.Tensor, gallery: torch.Tensor, k: int,
               self_ids: Optional[np.ndarray] = None) -> Iterator[NeighbourBlock]:
        """The top ``k`` of each query, a chunk of queries at a time.

        Args:
            query, gallery: nq x D and N x D float tensors of one dtype.
            k: neighbours per query, at most the gallery items a query can have.
            self_ids: (nq,) int64 gallery index of each query's own item, left out of its
                search (by index, so exact duplicates cannot break it); ``None``: none.

        Yields:
            :class:`NeighbourBlock` s in query order.
        """
