"""A sweep on a Slurm cluster: its unfinished runs as one job array, submitted with submitit.

submitit (``pip install "irtbox[slurm]"``) writes and submits the array (one task per run, at
most ``max_parallel`` at once: ``slurm_array_parallelism``), each task a pickled
:class:`RunTask` that trains and tests its run as a local sweep does (``execute.attempt``).
Slurm warns a task ``signal_seconds`` before its time limit or a pre-emption with SIGUSR1
(submitit's pre-emption signal, set to the one irtbox's ``PreemptionHook`` saves on): the
training saves a checkpoint and exits; submitit then calls :meth:`RunTask.checkpoint`, which
waits for that, and requeues the task, which resumes the training. A task that fails writes
the run's ``failed`` file; the others go on.

Each run's folder records the task it was submitted as (``slurm_job``: the executor and
submitit's job id, ``slurm 1234_5``); ``status`` reads each task's state from its submitit job
(``sacct``), and a new submission leaves out the tasks still queued or running, and the
finished runs.
"""
import os
import os.path as osp
import signal
import socket
from pathlib import Path
from shutil import which
from typing import Dict, List, Optional, Sequence, Tuple

from irtbox.engine.work_dir_lock import WorkDirLock
from irtbox.utils.errors import IrtboxError
from irtbox.utils.exit_status import PREEMPTED_EXIT_STATUS
from irtbox.utils.extras import require_extra
from irtbox.utils.fileio import atomic_write_text
from .execute import attempt
from .spec import Run
from .state import FAILED, PREEMPTED_MARK, saved_checkpoint, state_of

__all__ = ['JOB_FILE', 'JOBS_DIR', 'SubmitError', 'RunTask', 'make_executor', 'submit_runs',
           'queue_states', 'run_status', 'unqueued']

#: In a run's work dir: the executor and job id of the task it was last submitted as.
JOB_FILE = 'slurm_job'
#: Under the work root: submitit's folder (the pickled tasks, their output and results).
JOBS_DIR = 'slurm'
#: The signal Slurm sends before a pre-emption or the time limit, which PreemptionHook saves on.
PREEMPT_SIGNAL = 'USR1'
_RUNNING = ('RUNNING', 'COMPLETING', 'CONFIGURING', 'STAGE_OUT', 'SIGNALING')
_QUEUED = ('PENDING', 'REQUEUED', 'REQUEUE_HOLD', 'REQUEUE_FED', 'RESIZING', 'SUSPENDED')


class SubmitError(IrtboxError, RuntimeError):
    """The array could not be submitted (no Slurm here, or sbatch refused it)."""


class RunTask:
    """The job of one run in a submitit array: train (unless trained) and test it in
    subprocesses; returns None when done, ``'pre-empted'`` or ``'interrupted'`` when a signal
    stopped it (it goes on next time); raises ``RuntimeError`` (the run's ``failed`` file
    holds why) when it failed. Runs from the folder it was created in (relative configs)."""

    def __init__(self, keep_embeddings: bool = False, nproc: int = 1):
        self.keep_embeddings, self.nproc = keep_embeddings, nproc
        self.cwd = os.getcwd()

    def __call__(self, run: Run) -> Optional[str]:
        os.chdir(self.cwd)
        reason = attempt(run, self.keep_embeddings, nproc=self.nproc)
        if reason in (None, 'pre-empted', 'interrupted'):
            return reason
        raise RuntimeError(f'{run.work_dir}: {reason}')

    def checkpoint(self, run: Run):
        """submitit's pre-emption callback (in its signal handler): pass the signal on to the
        running step, wait for it to end (a training saves its checkpoint first and exits
        with status 75: the run is marked to resume), then requeue the same call."""
        import submitit
        for pid in _children():
            try:
                os.kill(pid, getattr(signal, f'SIG{PREEMPT_SIGNAL}'))
                # WNOWAIT: the exit status stays for the code that waits for the step.
                ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            except (ProcessLookupError, ChildProcessError):
                continue
            if ended.si_code == os.CLD_EXITED and ended.si_status == PREEMPTED_EXIT_STATUS:
                atomic_write_text(osp.join(run.work_dir, PREEMPTED_MARK), 'pre-empted\n')
        return submitit.helpers.DelayedSubmission(self, run)


def _children() -> List[int]:
    """The processes this one started (a task's running step), from /proc."""
    found = []
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):  # not a process, or it has just ended
            continue
        if fields[0] != 'Z' and int(fields[1]) == os.getpid():
            found.append(int(entry))
    return found


def make_executor(work_root: str, partition: str, nproc: int = 1,
                  max_parallel: Optional[int] = None, timeout_min: int = 1440,
                  slurm_params: Optional[dict] = None, signal_seconds: int = 120,
                  cluster: str = 'slurm'):
    """A submitit executor for the runs' array: ``nproc`` GPUs per task, at most
    ``max_parallel`` tasks at once, SIGUSR1 ``signal_seconds`` before the end;
    ``slurm_params``: more ``#SBATCH`` options. ``cluster='local'`` runs the tasks here."""
    require_extra(['submitit'], 'slurm', 'a sweep on Slurm')
    import submitit
    # submitit's pre-emption signal: here for the #SBATCH line; in each task (the environment
    # goes with the job) read from SUBMITIT_PREEMPT_SIGNAL when submitit is imported.
    os.environ['SUBMITIT_PREEMPT_SIGNAL'] = submitit.JobEnvironment.USR_SIG = PREEMPT_SIGNAL
    try:
        executor = submitit.AutoExecutor(folder=osp.join(osp.abspath(work_root), JOBS_DIR, '%j'),
                                         cluster=cluster)
    except RuntimeError as error:  # no srun: not a machine of a Slurm cluster
        raise SubmitError(f'cannot submit to Slurm here ({error})') from error
    executor.update_parameters(
        name='irtbox-sweep', nodes=1, tasks_per_node=1, timeout_min=timeout_min,
        **({'gpus_per_node': nproc} if nproc > 0 else {}),
        slurm_partition=partition, slurm_signal_delay_s=signal_seconds,
        slurm_additional_parameters=dict(dict(requeue=True), **(slurm_params or {})),
        **({'slurm_array_parallelism': max_parallel} if max_parallel else {}))
    return executor


def submit_runs(executor, runs: Sequence[Run], keep_embeddings: bool = False,
                nproc: int = 1) -> list:
    """Submit ``runs`` as one array of :class:`RunTask`; records each run's task and returns
    submitit's jobs."""
    from submitit.core.utils import FailedJobError
    for run in runs:
        os.makedirs(run.work_dir, exist_ok=True)
    try:
        jobs = executor.map_array(RunTask(keep_embeddings, nproc), list(runs))
    except FailedJobError as error:  # sbatch refused it; the message is sbatch's
        raise SubmitError(f'sbatch refused the array: {error}') from error
    for run, job in zip(runs, jobs):
        atomic_write_text(osp.join(run.work_dir, JOB_FILE), f'{executor.cluster} {job.job_id}\n')
    return jobs


def _recorded_task(run: Run) -> Optional[Tuple[str, str]]:
    path = Path(run.work_dir, JOB_FILE)
    fields = path.read_text().split() if path.is_file() else []
    return (fields[0], fields[1]) if len(fields) == 2 else None


def queue_states(runs: Sequence[Run], work_root: str) -> Optional[Dict[str, str]]:
    """``{'1234_5': 'RUNNING', ...}``: the state of each recorded Slurm task still queued or
    running, from its submitit job; None when Slurm cannot be asked (not on a cluster)."""
    tasks = [task for task in map(_recorded_task, runs) if task and task[0] == 'slurm']
    if not tasks:
        return {}
    if which('sacct') is None:
        return None
    import submitit
    folder = osp.join(osp.abspath(work_root), JOBS_DIR, '%j')
    states = {job_id: submitit.SlurmJob(folder, job_id).state for _, job_id in tasks}
    if all(state == 'UNKNOWN' for state in states.values()):
        return None
    return {job_id: state for job_id, state in states.items()
            if state.split()[0] in _RUNNING + _QUEUED}


def run_status(run: Run, queue: Optional[Dict[str, str]]) -> Tuple[str, str]:
    """(``done`` | ``running`` | ``failed`` | ``pending``, a detail) of one run."""
    state = state_of(run)
    if state == 'done':
        return 'done', ''
    task = _recorded_task(run)
    job_id = task[1] if task else None
    if job_id and queue and job_id in queue:
        running = queue[job_id].split()[0] in _RUNNING
        return ('running' if running else 'pending'), f'Slurm {job_id} {queue[job_id]}'
    if _held_locally(run):
        return 'running', 'training on this machine'
    if state == 'failed':
        with open(osp.join(run.work_dir, FAILED)) as f:
            return 'failed', f.readline().strip()
    saved = saved_checkpoint(run.work_dir)
    detail = ('trained, not tested yet' if state == 'trained' else
              f'started, not finished: {saved} saved, which the next attempt resumes from'
              if saved else 'not started')
    if job_id and queue is None:
        detail += f'; submitted as {job_id} (sacct unavailable: its queue state unknown)'
    return 'pending', detail


def _held_locally(run: Run) -> bool:
    """A training of this machine holds the run's work dir (a local sweep's run)."""
    holder = WorkDirLock(run.work_dir).holder()
    return bool(holder) and holder.get('host') == socket.gethostname()


def unqueued(runs: Sequence[Run], queue: Optional[Dict[str, str]]) -> List[Run]:
    """The runs to submit: not done, and not queued or running in Slurm now."""
    return [run for run in runs if state_of(run) != 'done'
            and not (queue and (_recorded_task(run) or ('', ''))[1] in queue)]
