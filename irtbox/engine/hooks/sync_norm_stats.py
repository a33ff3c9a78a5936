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
    """Average the running statistics of BatchNorm layers over the ranks after every training
    iteration. irtbox's DDP wrapper does not re-broadcast buffers (that would resend every
    cross-batch memory at each step), so without this hook the ranks' BatchNorm statistics drift
    apart: validation, tuple mining and the projection fits would run each rank's share through a
    different model, while the checkpoint keeps rank 0's. MMEngine's ``SyncBuffersHook`` averages
    once per epoch: too late for iteration-based runs."""

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
