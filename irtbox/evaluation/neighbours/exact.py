"""Exact search by chunked matrix products in torch: the default searcher of every metric."""
from dataclasses import dataclass
from typing import ClassVar, Iterator, Optional

import numpy as np
import torch

from irtbox.registry import SEARCHERS
from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import with_prefix
from ..functional.ranking import auto_chunk_size, similarity_blocks, stable_topk
from .base import Device, NeighbourBlock, Searcher

__all__ = ['ExactSearcher']


@SEARCHERS.register_module()
@dataclass(frozen=True)
class ExactSearcher(Searcher):
    """The exact top k by inner product, ties to the lower gallery index. ``chunk_size`` queries are
    multiplied with the whole gallery at once and each row's top k is selected without sorting it;
    the results equal a full stable sort. Each block carries its similarity rows, for a metric to
    count a rank beyond k.

    Args:
        chunk_size: queries per block (memory O(chunk_size x N)); ``None``: as many as keep
            a float32 block under 128 MB.
        device: where the products are computed; ``None``: the query tensor's device.
    """
    exhaustive: ClassVar[bool] = True
    gpu_when_available: ClassVar[bool] = True
    chunk_size: Optional[int] = None
    device: Device = None

    def __post_init__(self):
        try:
            check_positive_int(self.chunk_size, 'chunk_size', allow_none=True)
        except ValueError as err:  # the class is where a config's search setting fails
            raise with_prefix(err, type(self).__name__) from None

    @property
    def exact(self) -> bool:
        return True

    def search(self, query: torch.Tensor, gallery: torch.Tensor, k: int,
               self_ids: Optional[np.ndarray] = None) -> Iterator[NeighbourBlock]:
        chunk_size = auto_chunk_size(self.chunk_size, gallery.shape[0])
        own = None if self_ids is None else torch.as_tensor(self_ids, dtype=torch.long)
        for start, sims in similarity_blocks(query, gallery, chunk_size, self.device):
            if own is not None:
                rows = torch.arange(len(sims), device=sims.device)
                sims[rows, own[start:start + len(sims)].to(sims.device)] = float('-inf')
            scores, ids = stable_topk(sims, k)
            yield NeighbourBlock(start, scores, ids, sims)
