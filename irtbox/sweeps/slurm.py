"""A sweep on a Slurm cluster: its unfinished runs as one ``sbatch`` job array.

``tools/sweep.py SPEC --work-root W --launcher slurm`` writes ``W/slurm/sweep-<time>.sh`` and
submits it as an array of one task per run (``--array=0-(n-1)%MAX_PARALLEL``: at most
``--max-parallel`` at once), each task a pre-emptible, requeueable job (``--requeue``,
``--signal=USR1@120``): the task runs ``srun python -m irtbox sweep SPEC --work-root W --run
RUN_DIR``, which trains and tests that run as a local sweep does (``execute.run_one``). On
SIGUSR1 the training saves a checkpoint and requeues its task; the requeued task resumes it
(``SLURM_RESTART_COUNT``). A task that fails writes the run's ``failed`` file; the others go on.

Each run's folder records the task it was submitted as (``slurm_job``: ``ARRAYID_INDEX``);
``sweep.py status`` asks ``squeue`` which of them are still queued or running, and a new
submission leaves those out (and the finished ones).
"""
import datetime
import os
import os.path as osp
import shlex
import socket
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from irtbox.utils.fileio import atomic_write_text

from .spec import Run
from .state import FAILED, state_of

__all__ = ['JOB_FILE', 'SubmitError', 'array_script', 'submit_array', 'queue_states',
           'run_status', 'unqueued']

#: In a run's work dir: the Slurm task (``ARRAYID_INDEX``) it was last submitted as.
JOB_FILE = 'slurm_job'
#: Under the work root: the array scripts and the tasks' output.
JOBS_DIR = 'slurm'
_RUNNING = ('RUNNING', 'COMPLETING', 'CONFIGURING', 'STAGE_OUT', 'SIGNALING')


class SubmitError(RuntimeError):
    """sbatch refused the array (its message included)."""


def array_script(runs: Sequence[Run], spec_path: str, work_root: str,
                 keep_embeddings: bool = False, nproc: int = 1) -> str:
    """The batch script of the array: task ``i`` runs ``runs[i]`` in a job step (``srun``, so
    that Slurm's signals reach the training)."""
    command = [sys.executable, '-u', '-m', 'irtbox', 'sweep', osp.abspath(spec_path),
               '--work-root', osp.abspath(work_root), '--gpus', str(nproc)]
    if keep_embeddings:
        command.append('--keep-embeddings')
    lines = ['#!/usr/bin/env bash',
             '# Written by `irtbox sweep --launcher slurm`: task i of the array runs RUNS[i].',
             'set -euo pipefail',
             f'cd {shlex.quote(os.getcwd())}',
             'RUNS=(']
    lines += [f'  {shlex.quote(run.work_dir)}' for run in runs]
    lines += [')',
              f'exec srun --ntasks=1 {shlex.join(command)} --run "${{RUNS[$SLURM_ARRAY_TASK_ID]}}"',
              '']
    return '\n'.join(lines)


def submit_array(runs: Sequence[Run], spec_path: str, work_root: str, partition: str,
                 nproc: int = 1, max_parallel: Optional[int] = None,
                 sbatch_args: Sequence[str] = (), keep_embeddings: bool = False,
                 signal_seconds: int = 120, wait: bool = False) -> str:
    """Submit ``runs`` as one job array (see the module's docstring); returns its job id and
    records each run's task. With ``wait``, sbatch returns when the array has ended."""
    folder = osp.join(work_root, JOBS_DIR)
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now().strftime('%Y%m%d_%H%M%S_%f')
    script = osp.join(folder, f'sweep-{stamp}.sh')
    atomic_write_text(script, array_script(runs, spec_path, work_root, keep_embeddings, nproc))
    os.chmod(script, 0o755)
    for run in runs:
        os.makedirs(run.work_dir, exist_ok=True)
    array = f'0-{len(runs) - 1}' + (f'%{max_parallel}' if max_parallel else '')
    command = ['sbatch', '--parsable', f'--array={array}', '-p', partition,
               '--job-name=irtbox-sweep', '--ntasks=1',
               *([f'--gres=gpu:{nproc}'] if nproc > 0 else []),
               '--requeue', f'--signal=USR1@{signal_seconds}', '--open-mode=append',
               f'--output={osp.join(folder, "%A_%a.out")}', *sbatch_args]
    if wait:
        command.append('--wait')
    try:
        done = subprocess.run(command + [script], capture_output=True, text=True)
    except FileNotFoundError as error:
        raise SubmitError(f'--launcher slurm: sbatch not found ({error}); run the sweep on a '
                          'machine of the cluster') from error
    job = done.stdout.strip().split(';')[0].split()[-1] if done.stdout.strip() else ''
    if not job:
        raise SubmitError(f'sbatch {script} failed (exit status {done.returncode}): '
                          f'{done.stderr.strip() or done.stdout.strip()}')
    for i, run in enumerate(runs):
        atomic_write_text(osp.join(run.work_dir, JOB_FILE), f'{job}_{i}\n')
    if wait and done.returncode != 0:
        print(f'job array {job} ended with exit status {done.returncode} (a run failed or '
              'was stopped)', file=sys.stderr)
    return job


def _recorded_task(run: Run) -> Optional[str]:
    path = osp.join(run.work_dir, JOB_FILE)
    if not osp.isfile(path):
        return None
    with open(path) as f:
        return f.read().strip() or None


def queue_states(runs: Sequence[Run]) -> Optional[Dict[str, str]]:
    """``{'1234_5': 'RUNNING', ...}``: the Slurm state of each recorded task still in the
    queue (``squeue``); None when squeue cannot be asked (not on a cluster)."""
    arrays = sorted({task.split('_')[0] for task in map(_recorded_task, runs) if task})
    if not arrays:
        return {}
    try:
        done = subprocess.run(['squeue', '-h', '-r', '-o', '%i %T', '-j', ','.join(arrays)],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:  # e.g. every job of the list has left the queue's memory
        return {} if 'Invalid job id' in done.stderr else None
    states = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) == 2:
            states[fields[0]] = fields[1]
    return states


def _held_locally(run: Run) -> bool:
    """A training of this machine holds the run's work dir (a local sweep's run)."""
    from irtbox.engine.work_dir_lock import WorkDirLock
    holder = WorkDirLock(run.work_dir).holder()
    return bool(holder) and holder.get('host') == socket.gethostname()


def run_status(run: Run, queue: Optional[Dict[str, str]]) -> Tuple[str, str]:
    """(``done`` | ``running`` | ``failed`` | ``pending``, a detail) of one run."""
    state = state_of(run)
    if state == 'done':
        return 'done', ''
    task = _recorded_task(run)
    if task and queue and task in queue:
        return ('running' if queue[task] in _RUNNING else 'pending'), f'Slurm {task} {queue[task]}'
    if _held_locally(run):
        return 'running', 'training on this machine'
    if state == 'failed':
        with open(osp.join(run.work_dir, FAILED)) as f:
            return 'failed', f.readline().strip()
    detail = 'trained, not tested yet' if state == 'trained' else 'not started'
    if task and queue is None:
        detail += f'; submitted as {task} (squeue unavailable: its queue state unknown)'
    return 'pending', detail


def unqueued(runs: Sequence[Run], queue: Optional[Dict[str, str]]) -> List[Run]:
    """The runs to submit: not done, and not queued or running in Slurm now."""
    return [run for run in runs if state_of(run) != 'done'
            and not (queue and _recorded_task(run) in queue)]
