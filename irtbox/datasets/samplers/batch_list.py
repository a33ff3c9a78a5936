"""Base of the samplers that compose whole batches and deal them out to the ranks."""
import itertools
from typing import Iterator, Optional

from mmengine.dist import get_dist_info
from torch.utils.data import Sampler

__all__ = ['BatchListSampler']


class BatchListSampler(Sampler):
    """Yields the indices of this rank's batches, batch after batch.

    Subclasses build, from ``(seed, epoch)`` alone, the same global array of
    batches (K·W x batch_size) on every rank, in ``_global_batches(epoch)``;
    rank r takes batches r, r + W, ... They set ``rank``, ``world_size``,
    ``batch_size``, ``batches_per_rank``, ``infinite`` and ``epoch``.
    With ``infinite`` the sampler never stops: after each epoch it goes on with
    the next one (for iteration-based training, where MMEngine otherwise
    restarts the dataloader at every epoch end with a 2 s pause).
    """

    def _set_ranks(self, rank: Optional[int], world_size: Optional[int]) -> None:
        """This process's rank and the world size (default: the process group's)."""
        dist_rank, dist_world_size = get_dist_info()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world_size if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f'{type(self).__name__}: rank {self.rank} is not in '
                             f'[0, {self.world_size})')

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
