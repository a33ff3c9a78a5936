"""Keep the running statistics of normalisation layers equal on every rank."""
from collections import defaultdict

import torch
import torch.distributed as dist
from mmengine.hooks import Hook
from torch.nn.modules.batchnorm import _NormBase

from irtbox.registry import HOOKS
from .utils import bare_model

__all__ = ['SyncNormStatsHook', 'norm_running_stats']


def norm_running_stats(model: torch.nn.Module) -> list:
    """The floating running statistics (``running_mean``, ``running_var``) of every
    BatchNorm-like layer of ``model`` that tracks them, in module order."""
    return [buffer for module in model.modules()
            if isinstance(module, _NormBase) and module.track_running_stats
            for buffer in (module.running_mean, module.running_var) if buffer is not None]


@HOOKS.register_module()
class SyncNormStatsHook(Hook):
    """Average the running statistics of BatchNorm layers over the ranks after every
    training iteration.

    Under DDP each rank updates its BatchNorm running mean and variance from its own
    batches, and irtbox's DDP wrapper does not re-broadcast buffers (that would also
    resend every cross-batch memory at each step). Without this hook the ranks' models
    drift apart: validation, tuple mining and the PCA / whitening fits then run each
    rank's share of the data through a different model, while the checkpoint keeps rank
    0's. Averaging (one all-reduce of the statistics, a few kB for a ResNet-50) keeps
    every rank, validation and the checkpoint on the same model; the average is the
    statistics of all ranks' batches up to the variance of the rank means. MMEngine's
    ``SyncBuffersHook`` averages every buffer, once per epoch: too late for iteration-based
    runs, which validate and save between epochs.

    ``IrtboxRunner`` adds it as the default hook ``sync_norm_stats`` (a no-op on one
    process); ``default_hooks.sync_norm_stats=None`` drops it.
    """

    priority = 'ABOVE_NORMAL'  # before checkpoints (VERY_LOW) and validation

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return
        by_kind = defaultdict(list)
        for buffer in norm_running_stats(bare_model(runner)):
            by_kind[(buffer.dtype, buffer.device)].append(buffer)
        world = dist.get_world_size()
        for buffers in by_kind.values():
            flat = torch.cat([b.reshape(-1) for b in buffers])
            dist.all_reduce(flat)
            flat /= world
            for buffer, value in zip(buffers, flat.split([b.numel() for b in buffers])):
                buffer.copy_(value.view_as(buffer))
