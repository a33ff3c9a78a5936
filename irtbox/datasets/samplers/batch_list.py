"""Base of the samplers that compose whole batches and deal them out to the ranks."""
import itertools
from typing import Iterator, Optional

from mmengine.dist import get_dist_info, sync_random_seed
from torch.utils.data import Sampler

from irtbox.utils.checks import check_positive_int

__all__ = ['BatchListSampler']


class BatchListSampler(Sampler):
    """Yields the indices of this rank's batches, batch after batch.

    Subclasses build, from ``(seed, epoch)`` alone, the same global array of
    batches (K·W x batch_size) on every rank, in ``_global_batches(epoch)``;
    rank r takes batches r, r + W, ... They set ``batches_per_rank``.
    With ``infinite`` the sampler goes on epoch after epoch (iteration-based training,
    where MMEngine otherwise restarts the dataloader at every epoch end). A ``seed`` of None
    draws one, synchronised across ranks. ``rank`` / ``world_size`` default to
    ``mmengine.dist.get_dist_info()``. ``batch_size`` is the per-rank batch and must equal
    the dataloader's.
    """

    def __init__(self, dataset, batch_size: int, shuffle: bool, seed: Optional[int],
                 rank: Optional[int], world_size: Optional[int], infinite: bool):
        self.batch_size = check_positive_int(batch_size, f'{type(self).__name__}: batch_size')
        dist_rank, dist_world_size = get_dist_info()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world_size if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f'{type(self).__name__}: rank {self.rank} is not in '
                             f'[0, {self.world_size})')
        self.dataset = dataset
        self.shuffle = shuffle
        self.infinite = infinite
        self.seed = sync_random_seed() if seed is None else seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the order of epoch ``epoch`` (called by MMEngine's loops)."""
        self.epoch = epoch

    def _epoch_indices(self, epoch: int) -> list:
        return self._global_batches(epoch)[self.rank::self.world_size].reshape(-1).tolist()

    def __iter__(self) -> Iterator[int]:
        if not self.infinite:
            return iter(self._epoch_indices(self.epoch))
        return (i for epoch in itertools.count(self.epoch) for i in self._epoch_indices(epoch))

    def __len__(self) -> int:
        return self.batches_per_rank * self.batch_size
