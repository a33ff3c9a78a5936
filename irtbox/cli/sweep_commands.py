"""The command lines of a sweep's runs: what ``irtbox sweep`` has
:mod:`irtbox.sweeps.execute` and :mod:`irtbox.sweeps.slurm` run in subprocesses
(:class:`SweepCommands`), and the shell lines ``irtbox sweep --emit`` prints
(:func:`emit_command`)."""
import os.path as osp
import shlex
import sys
from typing import List, Optional

from irtbox.cli.launch import nproc_options
from irtbox.sweeps.spec import OFF_THE_SHELF, Run, value_dir
from irtbox.sweeps.state import EMBEDDINGS, RESULTS, TRAIN_DONE

__all__ = ['SweepCommands', 'emit_command']


def _options(run: Run) -> List[str]:
    return ['--cfg-options'] + run.options if run.options else []


class SweepCommands:
    """The arguments of ``python -m irtbox`` for a run's training and test (a class, so that
    a Slurm task pickles it by name)."""

    @staticmethod
    def train(run: Run, resume: bool = False, nproc: int = 1) -> List[str]:
        return (['train', run.config, '--work-dir', run.work_dir] + _options(run)
                + (['--resume'] if resume else []) + nproc_options(nproc))

    @staticmethod
    def test(run: Run, checkpoint: Optional[str], keep_embeddings: bool = False,
             nproc: int = 1) -> List[str]:
        out = osp.join(run.work_dir, EMBEDDINGS if keep_embeddings else RESULTS)
        return (['test', run.config] + ([checkpoint] if checkpoint else [])
                + ['--work-dir', osp.join(run.work_dir, 'test'), '--out', out] + _options(run)
                + nproc_options(nproc))


def emit_command(run: Run, mode: str, gpus: int = 1, partition: str = 'gpu',
                 keep_embeddings: bool = False) -> str:
    """One shell line that trains (unless off-the-shelf), tests and marks the run."""
    def q(args):
        return ' '.join(shlex.quote(str(a)) for a in args)
    py = shlex.quote(sys.executable)
    ckpt = ('"$( [ -f {d}/best.pth ] && echo {d}/best.pth || cat {d}/last_checkpoint )"'
            .format(d=shlex.quote(run.work_dir)))
    train_args = SweepCommands.train(run)[1:]  # config and options, after the command
    test_args = q(SweepCommands.test(run, None, keep_embeddings)[2:])
    job = shlex.quote(f'{run.factor}-{value_dir(run.value)}-{run.dataset}-{run.loss}-{run.seed}')
    if mode == 'plain':
        train = f'{py} -m irtbox train {q(train_args)}'
        test = f'{py} -m irtbox test {shlex.quote(run.config)} {ckpt} {test_args}'
    elif mode == 'dist':
        train = f'{py} -m irtbox train {q(train_args)} --nproc {gpus}'
        test = f'{py} -m irtbox test {shlex.quote(run.config)} {ckpt} {test_args} --nproc {gpus}'
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
