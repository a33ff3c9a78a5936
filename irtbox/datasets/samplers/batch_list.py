"""Base of the samplers that compose whole batches and deal them out to the ranks."""
import itertools
from typing import Iterator

from torch.utils.data import Sampler


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
