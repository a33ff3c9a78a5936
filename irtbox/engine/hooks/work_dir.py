"""One training at a time in a work dir, and a word before a new run overwrites an old one's
checkpoints."""
import glob
import os
import os.path as osp
from typing import Optional

from mmengine.dist import broadcast_object_list, is_distributed, is_main_process
from mmengine.hooks import Hook

from irtbox.registry import HOOKS

from ..work_dir_lock import WorkDirLock, WorkDirLocked
from .checkpoint import run_checkpoints
from .utils import is_training

__all__ = ['WorkDirLockHook']


@HOOKS.register_module()
class WorkDirLockHook(Hook):
    """Holds the work dir's lock (:class:`~irtbox.engine.work_dir_lock.WorkDirLock`) while
    training, and warns when a run from iteration 0 may overwrite checkpoints there.

    - ``before_run`` of a training: rank 0 takes the lock; a training holding it already is
      refused on every rank before any weights are loaded. Holding it, rank 0 removes the
      checkpoint temporaries that saves killed mid-write left (no live run's: it holds the lock).
    - ``before_train``: a run from iteration 0 names the checkpoints it overwrites.
    - ``train_finally``: the lock is released. Evaluation takes no lock."""

    priority = 'HIGHEST'  # the lock before any other hook's work

    def __init__(self) -> None:
        self._lock: Optional[WorkDirLock] = None

    def before_run(self, runner) -> None:
        if not is_training(runner):
            return
        refusal = None
        if is_main_process() and '://' not in runner.work_dir:
            try:
                self._lock = WorkDirLock(runner.work_dir, warn=runner.logger.warning).acquire()
            except WorkDirLocked as err:
                refusal = (err.work_dir, err.lock, err.holder)
            else:
                _remove_temporaries(runner)
        if is_distributed():  # every rank learns whether rank 0 was refused
            shared = [refusal]
            broadcast_object_list(shared, src=0)
            refusal = shared[0]
        if refusal is not None:
            raise WorkDirLocked(*refusal)

    def before_train(self, runner) -> None:
        existing = run_checkpoints(runner.work_dir) if runner.iter == 0 else []
        if existing:
            runner.logger.warning(
                f'{runner.work_dir} holds checkpoints of an earlier run '
                f'({", ".join(osp.basename(p) for p in existing)}); this run starts from '
                'iteration 0 and overwrites those of the same name: resume (resume=True) to '
                'continue that run, or train in another work_dir to keep both.')

    def train_finally(self, runner) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def _remove_temporaries(runner) -> None:
    """Remove the work dir's checkpoint temporaries (``atomic_write``'s
    ``.iter_7.pth.<random>.tmp.pth``: a full checkpoint each) and say what went."""
    paths = sorted(glob.glob(osp.join(glob.escape(runner.work_dir), '.*.tmp.pth')))
    if not paths:
        return
    size = 0
    for path in paths:
        size += osp.getsize(path)
        os.remove(path)
    amount, unit = size / 1e3, 'kB'
    for bigger in ('MB', 'GB'):
        if amount >= 1e3:
            amount, unit = amount / 1e3, bigger
    runner.logger.info(f'removed {len(paths)} checkpoint temporaries left by interrupted saves '
                       f'({amount:.1f} {unit}): {", ".join(map(osp.basename, paths))}')
