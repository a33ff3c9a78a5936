"""Stop training at the first non-finite loss instead of training on, and saving, NaNs."""
import math
from pathlib import Path
from typing import Optional

import torch
import torch.distributed as dist
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapper

from irtbox.registry import HOOKS
from irtbox.utils.dist import fail_together
from irtbox.utils.errors import IrtboxError
from .utils import bare_model

__all__ = ['NonFiniteLossError', 'NonFiniteLossHook']


class NonFiniteLossError(IrtboxError, RuntimeError):
    """Training met a non-finite loss (or weights) beyond what the config allows."""


def _non_finite_terms(log_vars: Optional[dict]) -> dict:
    terms = {}
    for name, value in (log_vars or {}).items():
        value = float(value.detach().float().mean()) if torch.is_tensor(value) else value
        if isinstance(value, float) and not math.isfinite(value):
            terms[name] = value
    return terms


class _HostFlag:
    """A 0-d flag read on the host without stalling the GPU: :meth:`send` queues its copy
    into page-locked memory (made once) and records an event; :meth:`read` waits for that
    copy only, not for the GPU work queued after it."""

    def __init__(self) -> None:
        self._flag = self._pinned = self._copied = None

    def send(self, flag: torch.Tensor) -> None:
        if not flag.is_cuda:
            self._flag, self._copied = flag, None
            return
        if self._pinned is None or self._pinned.dtype != flag.dtype:
            self._pinned = torch.empty((), dtype=flag.dtype, pin_memory=True)
            self._copied = torch.cuda.Event()
        self._pinned.copy_(flag, non_blocking=True)
        self._copied.record()
        self._flag = self._pinned

    def read(self) -> bool:
        if self._copied is not None:
            self._copied.synchronize()
        return bool(self._flag)


def _latest_checkpoint(runner) -> str:
    record = Path(runner.work_dir, 'last_checkpoint')
    if record.is_file():
        return record.read_text().strip() or 'none'
    return 'none (none was saved yet)'


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Skip the update of an iteration whose loss is NaN or infinite, and stop training
    (``NonFiniteLossError``, non-zero exit) once more than ``max_skipped`` were skipped,
    naming the iteration and the loss terms at fault.

    The skipped update never reaches the weights (under DDP every rank agrees), so the last
    checkpoint stays finite. With ``max_skipped > 0`` the model's buffers are copied before
    each iteration and restored when its update is skipped (a module keeping host copies of
    buffer values re-reads them in its ``buffers_restored()``). Checkpoints with a
    non-finite weight or buffer are refused.

    With gradient accumulation the whole window holding a non-finite loss is dropped,
    finite iterations included: their gradients are summed with the non-finite one. Every
    iteration still counts, so later windows end at the same iterations as without it.

    Args:
        max_skipped (int): non-finite iterations skipped before stopping (0: stop at the first).
    """

    priority = 'ABOVE_NORMAL'  # before CheckpointHook / LoggerHook in after_train_iter

    def __init__(self, max_skipped: int = 0):
        if max_skipped < 0:
            raise ValueError(f'NonFiniteLossHook: max_skipped={max_skipped}; expected >= 0')
        self.max_skipped = max_skipped
        self.skipped = 0
        self._skip_this_iter = False
        self._drop_window = False
        self._buffers = None
        self._finite = _HostFlag()
        self._guarding = False

    def before_train(self, runner) -> None:
        """Guard the optimizer wrapper's update (an OptimWrapperDict is checked after the
        iteration only, as its parts update separately)."""
        wrapper = runner.optim_wrapper
        self._guarding = isinstance(wrapper, OptimWrapper)
        if self._guarding:
            wrapper.update_params = self._guarded(wrapper)

    def _guarded(self, wrapper):
        def update_if_finite(loss, step_kwargs=None, zero_kwargs=None):
            finite = torch.isfinite(loss.detach()).all().float()
            if dist.is_available() and dist.is_initialized():
                # A NaN on one rank reaches every rank through the gradient all-reduce.
                dist.all_reduce(finite, op=dist.ReduceOp.MIN)
            self._finite.send(finite)
            # What update_params does, with the flag read between the backward (queued
            # first) and the step: the GPU is not left idle while the host waits.
            wrapper.backward(wrapper.scale_loss(loss))
            self._skip_this_iter = not self._finite.read()
            self._drop_window = self._drop_window or self._skip_this_iter
            if not wrapper.should_update():
                return
            if self._drop_window:  # the window's gradients go, the optimizer does not step
                wrapper.zero_grad(**(zero_kwargs or {}))
                self._drop_window = False
            else:
                wrapper.step(**(step_kwargs or {}))
                wrapper.zero_grad(**(zero_kwargs or {}))
        return update_if_finite

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        """Keep the buffers an iteration may be rolled back to in host memory (a GPU copy
        would double a cross-batch memory's), copied asynchronously into page-locked memory."""
        if self.max_skipped == 0:
            return
        buffers = dict(bare_model(runner).named_buffers())
        if self._buffers is None or self._buffers.keys() != buffers.keys():
            self._buffers = {name: torch.empty(b.shape, dtype=b.dtype, device='cpu',
                                               pin_memory=b.is_cuda)
                             for name, b in buffers.items()}
        for name, buffer in buffers.items():
            self._buffers[name].copy_(buffer.detach(), non_blocking=True)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        """Count a non-finite iteration; stop past ``max_skipped``. The loss terms are read
        (each read waits for the GPU) only when the guarded update found the loss non-finite,
        to name them, or when no update is guarded (an OptimWrapperDict)."""
        if self._guarding and not self._skip_this_iter:
            return
        terms = _non_finite_terms(outputs)
        if not (terms or self._skip_this_iter):
            return
        self._skip_this_iter = False
        self.skipped += 1
        described = ', '.join(f'{k}={v}' for k, v in terms.items()) or 'on another rank'
        where = f'iteration {runner.iter + 1}: non-finite loss ({described})'
        if self.skipped > self.max_skipped:
            raise NonFiniteLossError(
                f'{where}; training stopped ({self.skipped} non-finite iteration(s), '
                f'default_hooks.non_finite_loss.max_skipped={self.max_skipped}). The latest '
                f'checkpoint stays {_latest_checkpoint(runner)}. Lower the learning '
                'rate, or check the data and the loss terms named above.')
        if self._buffers is not None:
            model = bare_model(runner)
            for name, buffer in model.named_buffers():
                buffer.copy_(self._buffers[name])
            for module in model.modules():  # host copies of buffer values (counters, flags)
                restored = getattr(module, 'buffers_restored', None)
                if callable(restored):
                    restored()
        runner.logger.warning(f'{where}: update skipped ({self.skipped} of at most '
                              f'{self.max_skipped})')

    def prepare_checkpoint(self, runner) -> None:
        """On every rank, before rank 0 writes: refuse a checkpoint whose weights are not all
        finite on any rank (each checks its own: Partial FC's centres differ between ranks),
        every rank told (a check on rank 0 alone would leave the others waiting)."""
        with fail_together(f'iteration {runner.iter + 1}: the checkpoint\'s finite check'):
            self._check_finite(runner)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Refuse to write a checkpoint whose weights are not all finite: checked again on
        rank 0, for what another hook's ``prepare_checkpoint`` changed after the check above
        (a projection fitted there), and under a runner without that stage."""
        self._check_finite(runner)

    @staticmethod
    def _check_finite(runner) -> None:
        for name, value in bare_model(runner).state_dict().items():
            if value.is_floating_point() and not torch.isfinite(value).all():
                raise NonFiniteLossError(
                    f'iteration {runner.iter + 1}: weight or buffer {name} is not finite; the '
                    'checkpoint is not saved, the latest stays '
                    f'{_latest_checkpoint(runner)}')
