"""One training at a time in a work dir: a second one is refused naming the first; a stale
lock (its process gone) is taken over with a warning; the lock goes when the run ends."""
import json
import os
import socket
import subprocess
import sys

import pytest
from mmengine.hooks import Hook

from irtbox.cli import train as train_tool
from irtbox.engine.work_dir_lock import LOCK_NAME, WorkDirLock, WorkDirLocked
from irtbox.registry import HOOKS
from tests.forked_process import run_in_process
from tests.test_reliability.reliability_helpers import ROOT, TINY_CONFIG, run_log

SECOND = {}


def second_training(work_dir):
    train_tool.main([TINY_CONFIG, '--work-dir', work_dir])


@HOOKS.register_module(force=True)
class StartSecondTrainingHook(Hook):
    """At the first iteration, runs a second training into the same work dir (a process of its
    own, forked from the forkserver where the training's imports are done) and keeps its exit
    status and what it wrote to stderr."""

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter != 1 or SECOND:
            return
        SECOND['lock'] = open(os.path.join(runner.work_dir, LOCK_NAME)).read()
        stderr = os.path.join(os.path.dirname(runner.work_dir), 'second.stderr')
        SECOND['code'] = run_in_process(second_training, [runner.work_dir], cwd=ROOT,
                                        env={'HF_HUB_OFFLINE': '1'}, stderr=stderr)
        SECOND['stderr'] = open(stderr).read()


@pytest.mark.slow
def test_second_training_in_the_same_work_dir_is_refused(tmp_path, in_root):
    config = tmp_path / 'with_second.py'
    config.write_text(f"_base_ = ['{TINY_CONFIG}']\n"
                      "custom_hooks = [dict(type='StartSecondTrainingHook')]\n")
    work_dir = tmp_path / 'w'
    SECOND.clear()
    train_tool.main([str(config), '--work-dir', str(work_dir), '--cfg-options',
                     'train_cfg.max_iters=2'])
    # Before: both trained into w, overwrote each other's iter_2.pth, and exited 0.
    assert SECOND['code'] == 1, SECOND['stderr'][-3000:]
    holder = json.loads(SECOND['lock'])
    assert holder['pid'] == os.getpid() and holder['host'] == socket.gethostname()
    message = SECOND['stderr'].strip().splitlines()[-1]
    assert (f'{work_dir} is in use by another training (PID {os.getpid()} on host '
            f'{socket.gethostname()}, started {holder["started"]})') in message
    assert 'another --work-dir' in message
    assert not (work_dir / LOCK_NAME).exists()  # released at the end


def dead_pid():
    proc = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


@pytest.mark.slow
def test_stale_lock_is_taken_over(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    work_dir.mkdir()
    pid = dead_pid()
    (work_dir / LOCK_NAME).write_text(json.dumps(
        dict(pid=pid, host=socket.gethostname(), started='2024-01-01T00:00:00')))
    train_tool.main([TINY_CONFIG, '--work-dir', str(work_dir), '--cfg-options',
                     'train_cfg.max_iters=1'])
    assert (f'taking over the lock of a training that is gone (PID {pid} on '
            f'{socket.gethostname()}') in run_log(str(work_dir))
    assert (work_dir / 'iter_1.pth').exists() and not (work_dir / LOCK_NAME).exists()


@pytest.mark.slow
def test_lock_of_another_host_is_not_taken_over(tmp_path):
    (tmp_path / LOCK_NAME).write_text(json.dumps(
        dict(pid=dead_pid(), host='elsewhere', started='2024-01-01T00:00:00')))
    with pytest.raises(WorkDirLocked, match='on host elsewhere, started 2024-01-01T00:00:00'):
        WorkDirLock(str(tmp_path)).acquire()


@pytest.mark.slow
def test_lock_released_when_training_fails(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    with pytest.raises(SystemExit):  # the non-finite-loss stop
        train_tool.main([TINY_CONFIG, '--work-dir', str(work_dir), '--cfg-options',
                         'optim_wrapper.optimizer.lr=1e6', 'train_cfg.max_iters=3'])
    assert not (work_dir / LOCK_NAME).exists()
    with WorkDirLock(str(work_dir)):  # free again
        assert (work_dir / LOCK_NAME).exists()


def test_two_contenders_never_both_take_over(tmp_path):
    """Issue 47 item 9: a contender that read a dead holder's record just before another
    contender took over removed the new holder's lock and took it too. Here the holder's
    record still names the dead process (as the late contender read it): the kernel's lock
    refuses the contender all the same."""
    held = WorkDirLock(str(tmp_path)).acquire()
    (tmp_path / LOCK_NAME).write_text(json.dumps(
        dict(pid=dead_pid(), host=socket.gethostname(), started='2024-01-01T00:00:00')))
    with pytest.raises(WorkDirLocked, match='in use by another training'):
        WorkDirLock(str(tmp_path)).acquire()
    held.release()


def test_the_lock_of_a_killed_holder_is_free_at_once(tmp_path):
    """A holder killed (kill -9) leaves its record; the kernel released its lock, so the next
    training takes the work dir with a warning naming the gone holder."""
    code = ('import os, sys; from irtbox.engine.work_dir_lock import WorkDirLock; '
            f'WorkDirLock({str(tmp_path)!r}).acquire(); print(os.getpid(), flush=True); '
            'sys.stdin.read()')
    proc = subprocess.Popen([sys.executable, '-c', code], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    with pytest.raises(WorkDirLocked, match=f'PID {pid} on host'):
        WorkDirLock(str(tmp_path)).acquire()
    proc.kill()
    proc.wait()
    warned = []
    with WorkDirLock(str(tmp_path), warn=warned.append):
        assert json.loads((tmp_path / LOCK_NAME).read_text())['pid'] == os.getpid()
    assert f'taking over the lock of a training that is gone (PID {pid}' in warned[0]
    assert WorkDirLock(str(tmp_path)).holder() is None
