"""Pre-emption and time-based checkpoints: a training a cluster stops goes on where it stopped
(:class:`PreemptionHook`)."""
import os
import os.path as osp
import random
import signal
import subprocess
import time
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.distributed
from mmengine.dist import all_gather_object, get_rank, get_world_size, is_distributed
from mmengine.hooks import CheckpointHook, Hook

from irtbox.registry import HOOKS
from irtbox.utils.checks import check_number
from irtbox.utils.dist import host_group
from irtbox.utils.errors import IrtboxError
from irtbox.utils.exit_status import PREEMPTED_EXIT_STATUS
from irtbox.utils.fileio import atomic_write_text
from irtbox.utils.mmengine_compat import save_checkpoint_now, wrap_train_iterator

from .utils import resume_source

__all__ = ['PREEMPTED_EXIT_STATUS', 'Preempted', 'PreemptionHook', 'rng_state', 'set_rng_state',
           'requeue_slurm_job']

#: The key of a checkpoint that holds the ranks' random number generator states.
RNG_KEY = 'rng_states'


class Preempted(IrtboxError, RuntimeError):
    """Training stopped on a signal after saving ``checkpoint`` (the commands exit with
    :data:`PREEMPTED_EXIT_STATUS`); ``signal_name``: the signal, e.g. ``'SIGUSR1'``."""

    def __init__(self, message: str, signal_name: str, checkpoint: Optional[str]):
        super().__init__(message)
        self.signal_name = signal_name
        self.checkpoint = checkpoint


def rng_state() -> dict:
    """This process's generator states: Python's, NumPy's global one, torch's CPU one and the
    current CUDA device's (not every visible device's: another rank owns those, and a
    resumed task may not see them). Only tensors and plain values (``weights_only`` loads)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = dict(python=random.getstate(),
                 numpy=(kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                        float(gauss)),
                 torch=torch.get_rng_state())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state(torch.cuda.current_device())
    return state


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned (its tensors brought to the CPU first: the
    generators take CPU tensors)."""
    version, internal, gauss = state['python']
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, gauss = state['numpy']
    np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state['torch'].cpu())
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state['cuda'].cpu(), torch.cuda.current_device())


def requeue_slurm_job(env: Optional[dict] = None) -> Optional[str]:
    """``scontrol requeue`` this Slurm job; returns what happened in one line, None outside
    Slurm."""
    env = os.environ if env is None else env
    job = env.get('SLURM_JOB_ID')
    if not job:
        return None
    try:
        done = subprocess.run(['scontrol', 'requeue', job], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f'scontrol requeue {job} failed ({error}); resubmit the job by hand'
    if done.returncode != 0:
        return (f'scontrol requeue {job} failed (exit status {done.returncode}: '
                f'{done.stderr.strip()}); resubmit the job by hand')
    return f'Slurm job {job} requeued (scontrol requeue {job})'


class _RestoreRngBeforeBatch:
    """The loop's data iterator, restoring the saved RNG state right before batch ``skip``:
    drawing (and dropping) the batches already trained on uses the generators."""

    def __init__(self, iterator, skip: int, state: dict):
        self._iterator, self._skip, self._state = iterator, skip, state

    def __iter__(self):
        return self

    def __next__(self):
        if self._state is not None:
            if self._skip == 0:
                set_rng_state(self._state)
                self._state = None
            else:
                self._skip -= 1
        return next(self._iterator)

    def __getattr__(self, name):  # _dataloader, skip_iter, ... of MMEngine's iterator
        return getattr(self._iterator, name)


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Checkpoint and stop on a pre-emption signal; checkpoint every ``checkpoint_minutes``.

    - ``signals`` (default SIGTERM and SIGUSR1: Slurm's ``--signal=USR1@120``, torchrun's
      agent forwarding a SIGTERM): after the iteration in progress every rank knows (one
      all-reduce of two host numbers per iteration, over gloo between the hosts: nothing waits
      for the GPU), that iteration's checkpoint is saved through the config's
      ``CheckpointHook`` and :class:`Preempted` ends training.
    - ``checkpoint_minutes``: also save at the first iteration ending this many minutes
      after the last save, bounding what a hard kill costs. None: only the configured interval.
    - Every checkpoint carries each rank's generator states (:func:`rng_state`); a resumed run
      with the same number of ranks restores them before its first new batch.

    The iteration-based loop resumes at the exact data position; an epoch-based loop restarts
    the epoch in progress."""

    priority = 'LOWEST'  # after CheckpointHook: it may have saved this very iteration

    def __init__(self, signals=('SIGTERM', 'SIGUSR1'), checkpoint_minutes: Optional[float] = None):
        names = [signals] if isinstance(signals, str) else list(signals)
        self.signals = []
        for name in names:
            if not isinstance(name, str) or not isinstance(getattr(signal, name, None),
                                                           signal.Signals):
                raise ValueError(f'PreemptionHook: signals: expected signal names such as '
                                 f"'SIGTERM', 'SIGUSR1', got {name!r}")
            self.signals.append(getattr(signal, name))
        if checkpoint_minutes is not None:
            checkpoint_minutes = check_number(
                checkpoint_minutes, 'PreemptionHook: checkpoint_minutes (None or minutes)',
                strict=True)
        self.checkpoint_minutes = checkpoint_minutes
        self._received = 0
        self._previous: Dict[int, object] = {}
        self._last_save = time.monotonic()
        self._gathered: Optional[List[dict]] = None
        self._resumed_state: Optional[dict] = None

    # -- signals ---------------------------------------------------------------------------
    def _note(self, signum, frame):
        self._received = signum

    def before_train(self, runner) -> None:
        self._received = 0
        self._last_save = time.monotonic()
        try:
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._note)
        except ValueError:  # not the main thread (a notebook's or a sweep's thread)
            runner.logger.warning('preemption: training runs outside the main thread; '
                                  f'{", ".join(s.name for s in self.signals)} keep their '
                                  'default handlers (no checkpoint on pre-emption)')
        if self._resumed_state is not None:
            wrap_train_iterator(runner.train_loop, _RestoreRngBeforeBatch, runner.iter,
                                self._resumed_state)
        self._resumed_state = None

    def train_finally(self, runner=None) -> None:
        """Give the signals their handlers from before training back (idempotent)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    # -- each iteration ----------------------------------------------------------------------
    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        due = (self.checkpoint_minutes is not None and get_rank() == 0
               and time.monotonic() - self._last_save >= 60 * self.checkpoint_minutes)
        received = self._received
        if is_distributed():  # every rank decides the same, at the same iteration
            # Host values agreed between the hosts (a gloo group): on the device's stream the
            # read would wait for the GPU at every iteration.
            flags = torch.tensor([received, int(due)], dtype=torch.int64)
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX,
                                         group=host_group())
            received, due = flags[0].item(), bool(flags[1].item())
        if not (received or due):
            return
        if received and runner.iter + 1 >= runner.max_iters:
            # The last iteration: what is left (its validation, after_train) is quicker
            # than a restart, which would not run that validation.
            runner.logger.warning(f'{signal.Signals(received).name} received at the last '
                                  'iteration: finishing the run')
            self._received = 0
            return
        path = self._save(runner)
        if received:
            name = signal.Signals(received).name
            self.train_finally()
            raise Preempted(f'{name} received: stopped after iteration {runner.iter + 1} and '
                            f'saved {path}; the same command resumes from it', name, path)
        runner.logger.info(f'preemption: checkpoint_minutes={self.checkpoint_minutes:g} '
                           f'passed since the last checkpoint: saved {path}')

    def _save(self, runner) -> str:
        """The checkpoint of the iteration just done, through the config's CheckpointHook
        when it counts iterations (unless it saved this one already)."""
        done = runner.iter + 1
        hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)), None)
        if hook is not None and not hook.by_epoch:
            path = osp.join(hook.out_dir, hook.filename_tmpl.format(done))
            if getattr(hook, 'last_ckpt', None) != path:
                save_checkpoint_now(hook, runner)
            return path
        name = f'iter_{done}.pth'
        runner.save_checkpoint(runner.work_dir, name, by_epoch=False,
                               meta=dict(epoch=runner.epoch, iter=done))
        path = osp.join(runner.work_dir, name)
        if get_rank() == 0:
            atomic_write_text(osp.join(runner.work_dir, 'last_checkpoint'), path)
        return path

    # -- the generator states in checkpoints -------------------------------------------------
    def prepare_checkpoint(self, runner) -> None:
        """On every rank, before rank 0 writes: gather the ranks' generator states."""
        self._last_save = time.monotonic()
        state = rng_state()
        self._gathered = all_gather_object(state) if is_distributed() else [state]

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[RNG_KEY] = self._gathered if self._gathered is not None else [rng_state()]
        self._gathered = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        states = checkpoint.get(RNG_KEY)
        if resume_source(runner) is None or not states:
            return
        if len(states) != get_world_size():
            runner.logger.warning(
                f'resume: the checkpoint holds the generator states of {len(states)} ranks, '
                f'this run has {get_world_size()}: they are not restored (random '
                'augmentation and dropout go on from the seed)')
            return
        self._resumed_state = states[get_rank()]
