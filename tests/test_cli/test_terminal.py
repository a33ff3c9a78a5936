"""What a run shows on the terminal: a short header and its progress; the environment, config
and hooks dump (~290 lines before) only in the log file, unless --verbose (issue 49 item 6)."""
import glob
import re

import pytest

from irtbox.cli import train as train_tool
from tests.test_reliability.reliability_helpers import TINY_CONFIG

DUMPS = ('System environment:', 'Config:', 'Hooks will be executed in the following order')


def _train(tmp_path, capsys, *extra, iters=1):
    train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path), '--no-resume', *extra,
                     '--cfg-options', f'train_cfg.max_iters={iters}',
                     f'train_cfg.val_interval={iters}'])
    out = capsys.readouterr()
    (log, ) = glob.glob(str(tmp_path / '*' / '*.log'))
    return out.out + out.err, open(log).read()


@pytest.mark.slow
def test_the_terminal_shows_a_short_header_and_the_log_file_keeps_the_dump(tmp_path, capsys,
                                                                           in_root, monkeypatch):
    monkeypatch.setenv('IRTBOX_VERBOSE', '0')  # and put back after --verbose sets it
    terminal, log = _train(tmp_path / 'short', capsys)
    assert all(dump in log for dump in DUMPS)
    assert not any(dump in terminal for dump in DUMPS), terminal
    start = terminal.split('Iter(train)')[0]  # up to the first progress line
    assert len(start.splitlines()) <= 10, start
    assert f'config: {TINY_CONFIG}' in terminal and 'work dir: ' in terminal
    assert 'data: train 14 images (tests/data/sop); val 12 images' in terminal and 'device: cpu' in terminal
    terminal, log = _train(tmp_path / 'verbose', capsys, '--verbose', iters=7)
    assert all(dump in terminal for dump in DUMPS)
    # The time the rest should take, from iterations 2-6 (the first one warms up).
    assert re.search(r'expect: about 0:00:0\d for the 1 iterations left \(.* s per iteration '
                     r'over iterations 2-6\)', terminal)


@pytest.mark.slow
def test_a_test_shows_its_header_and_no_dump(tmp_path, capsys, in_root):
    from irtbox.cli import test as test_tool
    test_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path)])
    out = capsys.readouterr()
    terminal = out.out + out.err
    assert not any(dump in terminal for dump in DUMPS), terminal
    assert 'data: test 12 images (tests/data/sop)' in terminal
    assert 'expect: weights of the config (no checkpoint), progress' in terminal
    assert len(terminal.split('Iter(test)')[0].splitlines()) <= 8
