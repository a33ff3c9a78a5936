"""One training at a time in a work dir: two would overwrite each other's checkpoints and both
report success. A training holds ``WORK_DIR/.irtbox.lock`` (PID, host, start time; created with
``O_EXCL``) while it writes there; a second one is refused naming the first. A lock left by a
process of this host that is gone is taken over with a warning; one from another host never is (its
process cannot be checked from here). A job restarted by torchrun's agent or requeued by Slurm takes
over its own earlier attempt's lock, on any host: the record holds the job's id, and both restart a
job only after every process of the earlier attempt has ended."""
import atexit
import contextlib
import datetime
import json
import os
import os.path as osp
import socket
from typing import Callable, Optional

from irtbox.utils.errors import IrtboxError
from irtbox.utils.fileio import read_json

__all__ = ['LOCK_NAME', 'WorkDirLock', 'WorkDirLocked', 'job_id']

LOCK_NAME = '.irtbox.lock'


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


def _gone(holder: dict) -> bool:
    """The holder is another process of this host that no longer runs."""
    pid = holder.get('pid')
    if holder.get('host') != socket.gethostname() or not isinstance(pid, int) \
            or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: running, under another user
        pass
    return False


class WorkDirLock:
    """``with WorkDirLock(work_dir, warn=logger.warning): ...`` holds ``work_dir`` for this
    process, or raises :class:`WorkDirLocked` naming the holder."""

    def __init__(self, work_dir: str, warn: Optional[Callable[[str], None]] = None):
        self.work_dir = work_dir
        self.path = osp.join(work_dir, LOCK_NAME)
        self.warn = warn or (lambda message: None)
        self.held = False

    def _record(self) -> dict:
        record = dict(pid=os.getpid(), host=socket.gethostname(),
                      started=datetime.datetime.now().isoformat(timespec='seconds'))
        if job_id() is not None:
            record['job'] = job_id()
        return record

    def _read(self) -> Optional[dict]:
        try:
            record = read_json(self.path)
            return record if isinstance(record, dict) else {}
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # half written by a holder that died while writing it: unknown holder

    def holder(self) -> Optional[dict]:
        """The record of the training holding the work dir (``pid``, ``host``, ``started``,
        ``job``; ``{}`` when its record is unreadable), or None when the work dir is free or
        its holder was a process of this host that is gone."""
        holder = self._read()
        return None if holder is None or _gone(holder) else holder

    def acquire(self) -> 'WorkDirLock':
        os.makedirs(self.work_dir, exist_ok=True)
        for _ in range(3):  # a lock removed between our tries: try again
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._read()
                if holder is None:
                    continue
                if self._earlier_attempt(holder):
                    self.warn(f'{self.path}: taking over the lock of an earlier attempt of this '
                              f'job ({holder.get("job")}: PID {holder.get("pid")} on '
                              f'{holder.get("host")}, started {holder.get("started")})')
                elif _gone(holder):
                    self.warn(f'{self.path}: taking over the lock of a training that is gone '
                              f'(PID {holder.get("pid")} on {holder.get("host")}, started '
                              f'{holder.get("started")}, no longer running)')
                else:
                    raise WorkDirLocked(self.work_dir, self.path, holder)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.path)
                continue
            with os.fdopen(fd, 'w') as f:
                json.dump(self._record(), f)
                f.flush()
                os.fsync(f.fileno())
            self.held = True
            atexit.register(self.release)
            return self
        raise WorkDirLocked(self.work_dir, self.path, None)

    def _earlier_attempt(self, holder: dict) -> bool:
        """The holder is this job's attempt before a restart or requeue (not this process)."""
        if job_id() is None or holder.get('job') != job_id():
            return False
        # On this host: only once it has ended.
        return holder.get('host') != socket.gethostname() or _gone(holder)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        atexit.unregister(self.release)
        holder = self._read()
        if holder and holder.get('pid') == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
