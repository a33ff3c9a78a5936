"""--nproc: the command line torchrun gets (a real 2-process run goes through it in
tests/test_tools/test_dist_train.py, whose tools/dist_train.sh is `irtbox train --nproc`)."""
import sys

import pytest

from irtbox.cli import launch
from irtbox.cli import train as train_cli


def test_torchrun_command_runs_the_irtbox_command():
    line = launch.torchrun_command('test', 4, ['cfg.py', 'ck.pth', '--out', 'r.npz'],
                                   env=dict(NNODES='2', MASTER_ADDR='10.0.0.1', PORT='29999',
                                            SLURM_JOB_ID='77'), max_restarts=3)
    assert line[:3] == [sys.executable, '-m', 'irtbox.cli.launch']
    assert {'--nnodes=2', '--rdzv-backend=c10d', '--rdzv-endpoint=10.0.0.1:29999',
            '--rdzv-id=77', '--max-restarts=3', '--nproc-per-node=4'} <= set(line)
    assert line[line.index('-m', 3):] == ['-m', 'irtbox', 'test', '--launcher', 'pytorch',
                                          'cfg.py', 'ck.pth', '--out', 'r.npz']
    # The arguments win over the environment; one machine without PORT: any free port.
    line = launch.torchrun_command('train', 2, [], env=dict(NNODES='2', RDZV_ID='a'),
                                   nnodes='1:3', rdzv_endpoint='h:1', rdzv_id='b')
    assert {'--nnodes=1:3', '--rdzv-endpoint=h:1', '--rdzv-id=b'} <= set(line)
    line = launch.torchrun_command('train', 2, [], env={})
    assert '--rdzv-endpoint=127.0.0.1:0' in line and '--max-restarts=0' in line
    # Several machines without PORT: under Slurm the job's own port, not a fixed 29500.
    line = launch.torchrun_command('train', 2, [], env=dict(NNODES='2', SLURM_JOB_ID='77'))
    assert '--rdzv-endpoint=127.0.0.1:16232' in line
    with pytest.raises(SystemExit, match='same --rdzv-id'):
        launch.torchrun_command('train', 2, [], env=dict(NNODES='2'))


def test_torchrun_parses_the_command_line():
    """torchrun's own parser takes every option irtbox gives it (a torch upgrade that renamed
    one would fail here, not on a cluster)."""
    from torch.distributed import run as torchrun
    line = launch.torchrun_command('train', 2, ['cfg.py'], env=dict(SLURM_JOB_ID='7'),
                                   max_restarts=1, nnodes='1:2', rdzv_endpoint='h:5')
    args = torchrun.parse_args(line[3:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_backend, args.rdzv_endpoint,
            args.rdzv_id, args.max_restarts) == ('1:2', '2', 'c10d', 'h:5', '7', 1)
    assert 'SIGUSR1' in args.signals_to_handle.split(',')
    assert args.training_script == 'irtbox' and args.module


@pytest.mark.parametrize('argv', [['cfg.py', '--nproc', '2', '--resume'],
                                  ['cfg.py', '--nproc=2', '--resume'],
                                  ['--npro', '2', 'cfg.py', '--resume'],
                                  ['cfg.py', '--nproc', '2', '--max-restarts', '1', '--resume',
                                   '--rdzv-id=x']])
def test_relaunch_passes_everything_but_nproc(monkeypatch, argv):
    seen = []
    monkeypatch.setattr(launch.os, 'execv', lambda path, line: seen.append(line))
    args = train_cli.parse_args(argv)
    assert args.nproc == 2
    launch.relaunch('train', args, argv)
    line = seen[0]
    assert '--nproc-per-node=2' in line
    assert line[line.index('train') + 1:] == ['--launcher', 'pytorch', 'cfg.py', '--resume']
    assert ('--max-restarts=1' in line) == ('--max-restarts' in argv)


def test_max_restarts_alone_starts_torchrun(monkeypatch):
    seen = []
    monkeypatch.setattr(launch.os, 'execv', lambda path, line: seen.append(line))
    launch.relaunch('train', train_cli.parse_args(['cfg.py', '--max-restarts', '2']), None)
    assert '--nproc-per-node=1' in seen[0] and '--max-restarts=2' in seen[0]


@pytest.mark.parametrize('bad,message', [(['--max-restarts', '-1'], 'must be a non-negative integer, got -1'),
                                         (['--nnodes', '3:2'], 'MIN:MAX'),
                                         (['--nnodes', 'x'], 'MIN:MAX')])
def test_bad_launch_options(capsys, bad, message):
    with pytest.raises(SystemExit):
        train_cli.parse_args(['cfg.py', *bad])
    assert message in capsys.readouterr().err


def test_agent_exit_status(monkeypatch):
    """Pre-empted (SIGTERM / SIGUSR1 to the agent, or every failed worker exiting with 75) is
    75, as the training's own status; a worker that failed otherwise is 1."""
    import signal

    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from irtbox.engine import PREEMPTED_EXIT_STATUS
    assert PREEMPTED_EXIT_STATUS == 75  # the launcher's, the training's and the sweeps' one status

    def failing(error):
        def main(argv):
            raise error
        return main

    def failure(code):
        return ProcessFailure(local_rank=0, pid=1, exitcode=code, error_file='')

    cases = [(SignalException('x', signal.SIGTERM), 75), (SignalException('x', signal.SIGUSR1), 75),
             (SignalException('x', signal.SIGINT), 130),
             (ChildFailedError('irtbox', {0: failure(75), 1: failure(75)}), 75),
             (ChildFailedError('irtbox', {0: failure(75), 1: failure(1)}), 1)]
    for error, status in cases:
        monkeypatch.setattr(torchrun, 'main', failing(error))
        assert launch.agent_main([]) == status, error
    monkeypatch.setattr(torchrun, 'main', lambda argv: None)
    assert launch.agent_main([]) == 0


def test_no_relaunch_for_one_process_or_under_a_launcher(monkeypatch):
    monkeypatch.setattr(launch.os, 'execv', lambda *a: pytest.fail('relaunched'))
    launch.relaunch('train', train_cli.parse_args(['cfg.py']), ['cfg.py'])
    argv = ['cfg.py', '--nproc', '2', '--launcher', 'pytorch']
    launch.relaunch('train', train_cli.parse_args(argv), argv)


def test_nproc_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        train_cli.parse_args(['cfg.py', '--nproc', '0'])
    assert 'must be a positive integer' in capsys.readouterr().err
