"""One training at a time in a work dir: two would overwrite each other's checkpoints and both
report success. A training holds a kernel lock (``flock``, through :mod:`filelock`) on
``WORK_DIR/.irtbox.flock`` while it writes there, and records who it is (PID, host, start time,
job) in ``WORK_DIR/.irtbox.lock``; a second one is refused naming the first. The kernel releases
the lock when its holder dies, however it dies, so no staleness test is needed and two contenders
cannot both take over: a record left by a killed holder is taken over with a warning. A record of
another host is taken over only by a later attempt of the same job (torchrun's agent and Slurm's
requeue restart a job only after every process of the earlier attempt has ended): where a
filesystem's ``flock`` is local to each node, another host's live holder would not show here."""
import atexit
import contextlib
import json
import os
import os.path as osp
import socket
from typing import Callable, Optional

import filelock

from irtbox.utils.errors import IrtboxError
from irtbox.utils.fileio import atomic_write_text
from irtbox.utils.lock_record import lock_record, read_lock_record

__all__ = ['LOCK_NAME', 'FLOCK_NAME', 'WorkDirLock', 'WorkDirLocked', 'job_id']

LOCK_NAME = '.irtbox.lock'  # the holder's record
# What the kernel locks: a file of its own, as filelock may truncate the file it locks.
FLOCK_NAME = '.irtbox.flock'


def job_id() -> Optional[str]:
    """The id shared by every attempt of this job: Slurm's job id (kept by a requeue; an
    array task's own), else the run id torchrun gives the workers of all its restarts."""
    run = os.environ.get('TORCHELASTIC_RUN_ID')
    if run == 'none':  # torchrun's default when it was given no rendezvous id: not an id
        run = None
    return os.environ.get('SLURM_JOB_ID') or run or None


class WorkDirLocked(IrtboxError, RuntimeError):
    """Another training holds ``work_dir``: ``holder`` is its record (``{}`` when it left none;
    None when the lock could not be taken for another reason, :attr:`problem`)."""

    def __init__(self, work_dir: str, lock: str, holder: Optional[dict]):
        self.work_dir, self.lock, self.holder = work_dir, lock, holder
        super().__init__(f'{self.problem}. Train this one in another work_dir, or wait for '
                         f'that one to end. (If it is over, delete {lock}.)')

    @property
    def problem(self) -> str:
        holder = self.holder
        if holder is None:
            return f'{self.lock}: could not take the lock of {self.work_dir}'
        who = (f'PID {holder.get("pid")} on host {holder.get("host")}, started '
               f'{holder.get("started")}') if holder else 'a process that left no record'
        return (f'{self.work_dir} is in use by another training ({who}); two trainings in one '
                "work dir overwrite each other's checkpoints")


class WorkDirLock:
    """``with WorkDirLock(work_dir, warn=logger.warning): ...`` holds ``work_dir`` for this
    process, or raises :class:`WorkDirLocked` naming the holder."""

    def __init__(self, work_dir: str, warn: Optional[Callable[[str], None]] = None):
        self.work_dir = work_dir
        self.path = osp.join(work_dir, LOCK_NAME)
        self.warn = warn or (lambda message: None)
        self._flock = filelock.FileLock(osp.join(work_dir, FLOCK_NAME), timeout=0,
                                        thread_local=False)

    @property
    def held(self) -> bool:
        return self._flock.is_locked

    def _read(self) -> Optional[dict]:
        return read_lock_record(self.path)

    def _take(self) -> bool:
        """Take the kernel lock now; False when another process holds it."""
        try:
            self._flock.acquire()
        except filelock.Timeout:
            return False
        return True

    def holder(self) -> Optional[dict]:
        """The record of the training holding the work dir (``pid``, ``host``, ``started``,
        ``job``; ``{}`` when it left none readable), or None when the work dir is free (a
        record of this host left by a holder that is gone included)."""
        if self.held:
            return self._read()
        if not osp.isdir(self.work_dir):
            return None
        if not self._take():
            return self._read() or {}
        try:
            left = self._read()
            return left if left is not None and left.get('host') != socket.gethostname() else None
        finally:
            self._flock.release()

    def acquire(self) -> 'WorkDirLock':
        os.makedirs(self.work_dir, exist_ok=True)
        if not self._take():
            raise WorkDirLocked(self.work_dir, self.path, self._read() or {})
        try:
            left = self._read()  # a record under a free lock: its holder is gone
            if left is not None:
                self._take_over(left)
            job = job_id()
            atomic_write_text(self.path, json.dumps(lock_record(**({'job': job} if job else {}))))
        except BaseException:
            self._flock.release()
            raise
        atexit.register(self.release)
        return self

    def _take_over(self, left: dict) -> None:
        """Warn about a gone holder's record; refuse one of another host (its lock may not
        show here) unless it is an earlier attempt of this job."""
        who = f'PID {left.get("pid")} on {left.get("host")}, started {left.get("started")}'
        if job_id() is not None and left.get('job') == job_id():
            self.warn(f'{self.path}: taking over the lock of an earlier attempt of this job '
                      f'({left.get("job")}: {who})')
        elif left.get('host') == socket.gethostname():
            self.warn(f'{self.path}: taking over the lock of a training that is gone ({who}, '
                      'no longer running)')
        else:
            raise WorkDirLocked(self.work_dir, self.path, left)

    def release(self) -> None:
        if not self.held:
            return
        atexit.unregister(self.release)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)
        self._flock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
