"""--nproc: the command line torchrun gets (a real 2-process run goes through it in
tests/test_tools/test_dist_train.py, whose tools/dist_train.sh is `irtbox train --nproc`)."""
import sys

import pytest

from irtbox.cli import launch
from irtbox.cli import train as train_cli


def test_torchrun_command_runs_the_irtbox_command():
    line = launch.torchrun_command('test', 4, ['cfg.py', 'ck.pth', '--out', 'r.npz'],
                                   env=dict(NNODES='2', NODE_RANK='1', MASTER_ADDR='10.0.0.1',
                                            PORT='29999'))
    assert line[:3] == [sys.executable, '-m', 'torch.distributed.run']
    assert {'--nnodes=2', '--node_rank=1', '--master_addr=10.0.0.1', '--master_port=29999',
            '--nproc_per_node=4'} <= set(line)
    assert line[line.index('-m', 3):] == ['-m', 'irtbox', 'test', '--launcher', 'pytorch',
                                          'cfg.py', 'ck.pth', '--out', 'r.npz']


@pytest.mark.parametrize('argv', [['cfg.py', '--nproc', '2', '--resume'],
                                  ['cfg.py', '--nproc=2', '--resume'],
                                  ['--npro', '2', 'cfg.py', '--resume']])
def test_relaunch_passes_everything_but_nproc(monkeypatch, argv):
    seen = []
    monkeypatch.setattr(launch.os, 'execv', lambda path, line: seen.append(line))
    args = train_cli.parse_args(argv)
    assert args.nproc == 2
    launch.relaunch('train', args, argv)
    line = seen[0]
    assert '--nproc_per_node=2' in line
    assert line[line.index('train') + 1:] == ['--launcher', 'pytorch', 'cfg.py', '--resume']


def test_no_relaunch_for_one_process_or_under_a_launcher(monkeypatch):
    monkeypatch.setattr(launch.os, 'execv', lambda *a: pytest.fail('relaunched'))
    launch.relaunch('train', train_cli.parse_args(['cfg.py']), ['cfg.py'])
    argv = ['cfg.py', '--nproc', '2', '--launcher', 'pytorch']
    launch.relaunch('train', train_cli.parse_args(argv), argv)


def test_nproc_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        train_cli.parse_args(['cfg.py', '--nproc', '0'])
    assert 'must be a positive integer' in capsys.readouterr().err
