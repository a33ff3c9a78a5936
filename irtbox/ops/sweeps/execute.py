"""Running the runs of a sweep: here in subprocesses, several at a time, or as shell
commands for a cluster.

Runs: factor x value x dataset x loss x seed. Each has the work dir
WORK_ROOT/<factor>/<value>/<dataset>/<loss>/seed<seed>, where training writes
its checkpoints ('best.pth' from BestWeightsEarlyStoppingHook when the config
has it, else the last checkpoint), then `train_done`; its test then writes
the test metrics to test_results.json (with keep_embeddings, the embeddings to
test_results.npz and the metrics to test_results.json as well). A run whose
test_results.json exists is finished and skipped; one with `train_done` only is
tested again. A run whose training or test fails gets a `failed` file (the
command and its exit status) and the sweep goes on with the others, since some
points of the paper's grids cannot be computed (M = 1 or 2 with batch 256 on
CUB / Cars196, Fig. 8); the tables and figures are still written, the failed
runs are listed at the end (exit status 1), and the next call retries them.
A training stopped by a pre-emption signal (exit status 75, its checkpoint saved) is not a
failure: the run stays unfinished and the next call (or its requeued Slurm task) resumes it.
On Slurm the runs are the tasks of one submitit job array (:mod:`.slurm`). The command lines
of the steps: :mod:`irtbox.ops.commands`.
"""
import os
import os.path as osp
import queue
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import List, Optional

from irtbox.ops import commands
from irtbox.utils.cpus import usable_cpu_count
from irtbox.utils.exit_status import EXIT_WITH_PARENT_VAR, PREEMPTED_EXIT_STATUS
from irtbox.utils.fileio import atomic_write_text, read_json

from .spec import OFF_THE_SHELF, Run
from .state import FAILED, LOG, PREEMPTED_MARK, RESULTS, TRAIN_DONE, checkpoint_of

__all__ = ['run_one', 'run_all', 'attempt']


def run_one(run: Run, keep_embeddings: bool = False, env: Optional[dict] = None,
            nproc: int = 1) -> None:
    """Trains (unless already trained) and tests one run in subprocesses whose output goes to
    ``<work_dir>/sweep.log``; a failing step raises ``subprocess.CalledProcessError``. ``env``: extra environment
    variables; ``nproc``: processes of each step."""
    os.makedirs(run.work_dir, exist_ok=True)
    failed = osp.join(run.work_dir, FAILED)
    if osp.isfile(failed):
        os.remove(failed)
    # A sweep stopped (SIGTERM, killed) takes its runs along (Ctrl-C reaches them anyway).
    env = dict(os.environ, **(env or {}), **{EXIT_WITH_PARENT_VAR: '1'})
    with open(osp.join(run.work_dir, LOG), 'a') as log:
        # Off the shelf there is no checkpoint, which a test of several processes needs.
        steps = 1 if run.factor == OFF_THE_SHELF else nproc

        def call(args):
            subprocess.run(commands.irtbox_command(args), check=True, env=env, stdout=log,
                           stderr=subprocess.STDOUT)

        if not osp.isfile(osp.join(run.work_dir, TRAIN_DONE)) and run.factor != OFF_THE_SHELF:
            mark = osp.join(run.work_dir, PREEMPTED_MARK)
            # A training pre-empted in an earlier attempt goes on from its checkpoint.
            call(commands.sweep_train(run, resume=osp.isfile(mark), nproc=steps))
            open(osp.join(run.work_dir, TRAIN_DONE), 'w').close()
            if osp.isfile(mark):
                os.remove(mark)
        ckpt = None if run.factor == OFF_THE_SHELF else checkpoint_of(run.work_dir)
        call(commands.sweep_test(run, ckpt, keep_embeddings, nproc=steps))


def _job_devices(jobs: int) -> List[Optional[str]]:
    """The CUDA device of each of ``jobs`` parallel runs: the visible GPUs in turn; None for
    each when there is no GPU."""
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    if visible is not None:
        devices = [d.strip() for d in visible.split(',') if d.strip() and d.strip() != '-1']
    else:
        import torch
        devices = [str(i) for i in range(torch.cuda.device_count())]
    if not devices:
        return [None] * jobs
    return [devices[i % len(devices)] for i in range(jobs)]


def _tail(path: str, lines: int = 5) -> str:
    if not osp.isfile(path):
        return ''
    with open(path, errors='replace') as f:
        return ''.join(f.readlines()[-lines:])


def attempt(run: Run, keep_embeddings: bool = False, env: Optional[dict] = None,
            nproc: int = 1) -> Optional[str]:
    """:func:`run_one`, returning None when it finished; ``'pre-empted'`` (exit status 75: it
    resumes next time); ``'interrupted'`` when a step was ended by a signal before it could
    save; else the reason it failed, also written to its ``failed`` file."""
    try:
        run_one(run, keep_embeddings, env, nproc)
        return None
    except subprocess.CalledProcessError as error:
        if error.returncode == PREEMPTED_EXIT_STATUS:
            atomic_write_text(osp.join(run.work_dir, PREEMPTED_MARK), shlex.join(error.cmd) + '\n')
            return 'pre-empted'
        if error.returncode in (-signal.SIGTERM, -signal.SIGUSR1):
            return 'interrupted'
        reason = f'exit status {error.returncode}: {shlex.join(error.cmd)}'
    except FileNotFoundError as error:  # trained, but no checkpoint to test
        reason = str(error)
    atomic_write_text(osp.join(run.work_dir, FAILED), reason + '\n')
    return reason


def run_all(todo: List[Run], jobs: int = 1, keep_embeddings: bool = False) -> None:
    """Runs ``todo``, ``jobs`` at a time, one line per finished run to stderr. With
    ``jobs > 1`` each run gets ``cores // jobs`` CPU threads and a visible GPU, in turn. On
    ``KeyboardInterrupt`` the running ones finish (they got the signal too), nothing new
    starts, and the interrupt goes on to the caller."""
    slots = queue.Queue()
    devices = _job_devices(jobs) if jobs > 1 else [None]
    gpus = sorted(set(d for d in devices if d is not None))
    if len(gpus) < len(devices) and gpus:
        print(f'{jobs} parallel runs share {len(gpus)} GPU(s) in turn (CUDA_VISIBLE_DEVICES '
              f'{", ".join(devices)} for runs 1 to {jobs})', file=sys.stderr)
    for device in devices:
        slots.put(device)
    threads = str(max(1, usable_cpu_count() // jobs))

    def work(run: Run):
        device = slots.get()
        env = dict(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads) if jobs > 1 else {}
        if device is not None:
            env['CUDA_VISIBLE_DEVICES'] = device
        start = time.time()
        try:
            return attempt(run, keep_embeddings, env), time.time() - start
        finally:
            slots.put(device)

    # Runs are submitted from this thread only, one per finished run, so that after an
    # interruption nothing new starts (the running ones got the signal too).
    pool = ThreadPoolExecutor(max_workers=jobs)
    waiting, running, finished = iter(todo), {}, 0

    def submit_next():
        run = next(waiting, None)
        if run is not None:
            running[pool.submit(work, run)] = run

    try:
        for _ in range(jobs):
            submit_next()
        while running:
            for future in wait(running, return_when=FIRST_COMPLETED).done:
                run = running.pop(future)
                reason, seconds = future.result()
                finished += 1
                if reason is None:
                    metrics = read_json(osp.join(run.work_dir, RESULTS))
                    shown = '  '.join(f'{k} {v:.4f}' for k, v in sorted(metrics.items()))
                    print(f'[{finished}/{len(todo)}] {run.work_dir}  {seconds:.0f} s  {shown}',
                          file=sys.stderr)
                elif reason in ('pre-empted', 'interrupted'):
                    print(f'[{finished}/{len(todo)}] {run.work_dir}  {reason} by a signal (the '
                          'next call goes on with it)', file=sys.stderr)
                else:
                    log = osp.join(run.work_dir, LOG)
                    print(f'[{finished}/{len(todo)}] {run.work_dir}  FAILED ({reason}); end of '
                          f'{log}:\n{_tail(log)}', file=sys.stderr)
                submit_next()
    finally:
        pool.shutdown(wait=True)
