"""Every command line the operations tier starts: the one module outside :mod:`irtbox.cli` that
names irtbox's commands and options (tests/test_command_line_boundary.py holds it to that).
A rehearsal's phases and a sweep's runs go through the commands users run, so that they
rehearse and measure what a user gets; :func:`emit_command` prints a run's shell line."""
import os.path as osp
import shlex
import sys
from typing import List, Optional

from .sweeps.spec import OFF_THE_SHELF, Run, value_dir
from .sweeps.state import EMBEDDINGS, RESULTS, TRAIN_DONE

__all__ = ['irtbox_command', 'nproc_options', 'rehearsal_train', 'rehearsal_test',
           'rehearsal_phases', 'rehearsal_session', 'sweep_train',
           'sweep_test', 'emit_command']


def irtbox_command(args: List[str]) -> List[str]:
    """``python -m irtbox ARGS`` with this Python."""
    return [sys.executable, '-m', 'irtbox', *args]


def nproc_options(nproc: int) -> List[str]:
    """The ``--nproc`` of a command line that runs on ``nproc`` processes (none for one)."""
    return ['--nproc', str(nproc)] if nproc > 1 else []


def _cfg_options(options: List[str]) -> List[str]:
    return ['--cfg-options', *options] if options else []


def rehearsal_train(config: str, work_dir: str, options: dict, resume: bool,
                    nproc: int) -> List[str]:
    return (['train', config, '--work-dir', work_dir]
            + _cfg_options([f'{k}={v}' for k, v in options.items()])
            + (['--resume'] if resume else []) + nproc_options(nproc))


def rehearsal_test(config: str, checkpoint: str, work_dir: str, nproc: int) -> List[str]:
    return ['test', config, checkpoint, '--work-dir', work_dir] + nproc_options(nproc)


def rehearsal_phases(config: str, run_dir: str, options: dict, test_dir: str) -> dict:
    """The plan of a one-session rehearsal (``irtbox rehearse --session PLAN``): each phase's
    name and command line, run on every rank one after the other; the test phase takes the
    checkpoint named in ``<checkpoint_of>/last_checkpoint`` when it starts."""
    return dict(phases=[
        dict(name='train', args=rehearsal_train(config, run_dir, options, False, 1)),
        dict(name='resume', args=rehearsal_train(config, run_dir, {}, True, 1)),
        dict(name='test', args=['test', config, '--work-dir', test_dir], checkpoint_of=run_dir)])


def rehearsal_session(plan: str, nproc: int) -> List[str]:
    return ['rehearse', '--session', plan] + nproc_options(nproc)


def sweep_train(run: Run, resume: bool = False, nproc: int = 1) -> List[str]:
    return (['train', run.config, '--work-dir', run.work_dir] + _cfg_options(run.options)
            + (['--resume'] if resume else []) + nproc_options(nproc))


def sweep_test(run: Run, checkpoint: Optional[str], keep_embeddings: bool = False,
               nproc: int = 1) -> List[str]:
    out = osp.join(run.work_dir, EMBEDDINGS if keep_embeddings else RESULTS)
    return (['test', run.config] + ([checkpoint] if checkpoint else [])
            + ['--work-dir', osp.join(run.work_dir, 'test'), '--out', out]
            + _cfg_options(run.options) + nproc_options(nproc))


def emit_command(run: Run, mode: str, gpus: int = 1, partition: str = 'gpu',
                 keep_embeddings: bool = False) -> str:
    """One shell line that trains (unless off-the-shelf), tests and marks the run."""
    def q(args):
        return ' '.join(shlex.quote(str(a)) for a in args)
    py = shlex.quote(sys.executable)
    ckpt = ('"$( [ -f {d}/best.pth ] && echo {d}/best.pth || cat {d}/last_checkpoint )"'
            .format(d=shlex.quote(run.work_dir)))
    train_args = sweep_train(run)[1:]  # config and options, after the command
    test_args = q(sweep_test(run, None, keep_embeddings)[2:])
    job = shlex.quote(f'{run.factor}-{value_dir(run.value)}-{run.dataset}-{run.loss}-{run.seed}')
    if mode in ('plain', 'dist'):
        nproc = f' --nproc {gpus}' if mode == 'dist' else ''
        train = f'{py} -m irtbox train {q(train_args)}{nproc}'
        test = f'{py} -m irtbox test {shlex.quote(run.config)} {ckpt} {test_args}{nproc}'
    elif mode == 'slurm':
        # slurm_train.sh submits a batch job; --wait: the line goes on when it has ended.
        train = (f'SBATCH_ARGS=--wait GPUS={gpus} tools/slurm_train.sh '
                 f'{shlex.quote(partition)} {job} {q(train_args)}')
        test = (f'GPUS={gpus} tools/slurm_test.sh {shlex.quote(partition)} {job} '
                f'{shlex.quote(run.config)} {ckpt} {test_args}')
    else:
        raise ValueError(f"emit mode must be 'plain', 'dist' or 'slurm', got {mode!r}")
    if run.factor == OFF_THE_SHELF:
        # No checkpoint, which the dist/slurm test scripts require: one process.
        return (f'mkdir -p {shlex.quote(run.work_dir)} && '
                f'{py} -m irtbox test {shlex.quote(run.config)} {test_args}')
    return ' && '.join([f'mkdir -p {shlex.quote(run.work_dir)}', train,
                        f'touch {shlex.quote(osp.join(run.work_dir, TRAIN_DONE))}', test])
