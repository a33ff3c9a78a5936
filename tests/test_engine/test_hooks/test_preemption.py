"""PreemptionHook on one process (the 2-rank SIGTERM and restart runs are in
tests/test_reliability/test_cluster.py), the lock of an earlier attempt of a job, the
identity of a training and when a training resumes by default."""
import json
import os
import os.path as osp
import random
import signal
import socket

import filelock
import numpy as np
import pytest
import torch

from irtbox.cli import train as train_tool
from irtbox.engine import PreemptionHook
from irtbox.engine.hooks import preemption
from irtbox.engine.work_dir_lock import FLOCK_NAME, LOCK_NAME, WorkDirLock, WorkDirLocked
from irtbox.utils.checkpoint import safe_torch_load
from tests.gpu_semantics import FakeCuda, cpu_generator_rules, on_device

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


@pytest.mark.slow
def test_checkpoint_every_n_minutes_and_on_a_signal(tmp_path, monkeypatch):
    """Time-based checkpoints (the clock at +61 s after each iteration: one checkpoint a minute
    is due every time) besides an interval that never comes; then a SIGUSR1 noted during
    iteration 3 stops training after it with that iteration's checkpoint."""
    monkeypatch.chdir(ROOT)
    clock = iter(range(0, 10_000, 61))
    monkeypatch.setattr(preemption.time, 'monotonic', lambda: float(next(clock)))
    work_dir = str(tmp_path / 'w')
    original = PreemptionHook.after_train_iter

    def signal_at_3(self, runner, *args, **kwargs):
        if runner.iter + 1 == 3:
            self._note(signal.SIGUSR1, None)  # what the handler does on the signal
        return original(self, runner, *args, **kwargs)

    monkeypatch.setattr(PreemptionHook, 'after_train_iter', signal_at_3)
    with pytest.raises(SystemExit) as stop:
        train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--cfg-options',
                         'train_cfg.max_iters=5', 'default_hooks.checkpoint.interval=100',
                         'default_hooks.checkpoint.max_keep_ckpts=-1',
                         'default_hooks.preemption.checkpoint_minutes=1'])
    assert stop.value.code == preemption.PREEMPTED_EXIT_STATUS
    assert sorted(n for n in os.listdir(work_dir) if n.endswith('.pth')) == [
        'iter_1.pth', 'iter_2.pth', 'iter_3.pth']
    assert open(osp.join(work_dir, 'last_checkpoint')).read() == osp.join(work_dir, 'iter_3.pth')
    assert safe_torch_load(osp.join(work_dir, 'iter_3.pth'))['meta']['iter'] == 3
    assert not osp.exists(osp.join(work_dir, LOCK_NAME))  # released on the way out
    assert signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, None)  # handlers given back


@pytest.mark.slow
def test_a_signal_at_the_last_iteration_finishes_the_run(tmp_path, monkeypatch):
    """Stopping there would leave the final validation to a restart that never runs it."""
    monkeypatch.chdir(ROOT)
    original = PreemptionHook.after_train_iter

    def signal_at_2(self, runner, *args, **kwargs):
        if runner.iter + 1 == 2:
            self._note(signal.SIGTERM, None)
        return original(self, runner, *args, **kwargs)

    monkeypatch.setattr(PreemptionHook, 'after_train_iter', signal_at_2)
    work_dir = str(tmp_path / 'w')
    train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--cfg-options',
                     'train_cfg.max_iters=2', 'train_cfg.val_interval=2'])  # no SystemExit
    assert safe_torch_load(osp.join(work_dir, 'iter_2.pth'))['meta']['iter'] == 2


def test_rng_state_round_trips():
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    state = preemption.rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    preemption.set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_rng_state_restores_from_a_checkpoint_loaded_onto_the_gpu():
    """On a GPU machine a checkpoint loaded with MMEngine's default map location holds CUDA
    tensors; NumPy's and torch's CPU generators take CPU tensors only (before: TypeError
    "can't convert cuda:0 device type tensor to numpy", every resume on a GPU)."""
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    state = on_device(preemption.rng_state())
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    with cpu_generator_rules():
        preemption.set_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_the_cuda_generator_state_is_this_processs_own_device(monkeypatch):
    """Saved by a rank whose current device is 3 of 8 visible, restored by a task that sees
    one GPU (before: every visible device's state saved, restored by index: IndexError /
    invalid device ordinal), and the reverse, which restored another device's state into
    the current one."""
    saver = FakeCuda(monkeypatch, count=8, current=3)
    state = preemption.rng_state()
    torch.testing.assert_close(state['cuda'], saver.states[3])
    resumer = FakeCuda(monkeypatch, count=1, current=0)
    preemption.set_rng_state(state)
    torch.testing.assert_close(resumer.states[0], saver.states[3])

    one = FakeCuda(monkeypatch, count=1, current=0)
    state = preemption.rng_state()
    many = FakeCuda(monkeypatch, count=8, current=5)
    untouched = [s.clone() for s in many.states]
    preemption.set_rng_state(state)
    torch.testing.assert_close(many.states[5], one.states[0])
    for i in (0, 1, 2, 3, 4, 6, 7):
        torch.testing.assert_close(many.states[i], untouched[i])


@pytest.mark.parametrize('kwargs,message', [(dict(signals=['SIGNOPE']), 'signal names'),
                                            (dict(checkpoint_minutes=0), 'minutes'),
                                            (dict(checkpoint_minutes=True), 'minutes')])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PreemptionHook(**kwargs)


def test_requeue_calls_scontrol(tmp_path, monkeypatch):
    fake = tmp_path / 'scontrol'
    fake.write_text('#!/bin/sh\necho "$@" > "$0.args"\n')
    fake.chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    assert preemption.requeue_slurm_job({}) is None
    assert preemption.requeue_slurm_job(dict(SLURM_JOB_ID='42')) == \
        'Slurm job 42 requeued (scontrol requeue 42)'
    assert (tmp_path / 'scontrol.args').read_text().split() == ['requeue', '42']
    fake.write_text('#!/bin/sh\necho "Invalid job id" >&2; exit 1\n')
    assert 'failed (exit status 1: Invalid job id)' in preemption.requeue_slurm_job(
        dict(SLURM_JOB_ID='42'))


def write_lock(work_dir, **record):
    os.makedirs(work_dir, exist_ok=True)
    with open(osp.join(work_dir, LOCK_NAME), 'w') as f:
        json.dump(dict(pid=1, started='2026-01-01T00:00:00', **record), f)


def test_a_restarted_job_takes_over_its_own_lock_on_another_host(tmp_path, monkeypatch):
    for key in ('SLURM_JOB_ID', 'TORCHELASTIC_RUN_ID'):
        monkeypatch.delenv(key, raising=False)
    write_lock(str(tmp_path / 'a'), host='node-17', job='4242')
    with pytest.raises(WorkDirLocked, match='node-17'):  # not this job's: refused
        WorkDirLock(str(tmp_path / 'a')).acquire()
    monkeypatch.setenv('SLURM_JOB_ID', '4242')  # requeued onto this host
    warned = []
    lock = WorkDirLock(str(tmp_path / 'a'), warn=warned.append).acquire()
    assert 'an earlier attempt of this job (4242' in warned[0]
    assert json.load(open(lock.path))['job'] == '4242'
    lock.release()
    # On this host the earlier attempt must have ended; another job's lock is refused.
    monkeypatch.setenv('SLURM_JOB_ID', '7')
    write_lock(str(tmp_path / 'b'), host=socket.gethostname(), job='7')
    running = filelock.FileLock(osp.join(tmp_path / 'b', FLOCK_NAME), thread_local=False)
    with running, pytest.raises(WorkDirLocked):  # the earlier attempt still holds the lock
        WorkDirLock(str(tmp_path / 'b')).acquire()
    # torchrun's run id counts as the job's id; its default 'none' does not.
    monkeypatch.delenv('SLURM_JOB_ID')
    monkeypatch.setenv('TORCHELASTIC_RUN_ID', 'none')
    write_lock(str(tmp_path / 'c'), host='node-17', job='none')
    with pytest.raises(WorkDirLocked):
        WorkDirLock(str(tmp_path / 'c')).acquire()


@pytest.mark.parametrize('argv,expected', [
    # Before: one process resumed only with --resume, so "the same command resumes" was
    # false after a SIGTERM to it; now every way of starting follows one rule.
    ([], True),
    (['--launcher', 'pytorch'], True),
    (['--launcher', 'slurm', '--no-resume'], False),
    (['--no-resume'], False)])
def test_who_resumes_by_default(argv, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = train_tool.parse_args([TINY_CONFIG, '--work-dir', str(tmp_path), *argv])
    assert bool(train_tool.build_cfg(args).get('resume')) == expected


@pytest.mark.slow
def test_resuming_by_default_keeps_load_from_until_there_are_checkpoints(tmp_path, monkeypatch):
    """A fine-tuning under a launcher starts from its load_from; restarted, from its own
    checkpoint."""
    monkeypatch.chdir(ROOT)
    argv = [TINY_CONFIG, '--launcher', 'pytorch', '--work-dir', str(tmp_path),
            '--cfg-options', 'load_from=start.pth']
    cfg = train_tool.build_cfg(train_tool.parse_args(argv))
    assert (cfg.resume, cfg.load_from) == (False, 'start.pth')
    (tmp_path / 'iter_2.pth').write_bytes(b'')
    cfg = train_tool.build_cfg(train_tool.parse_args(argv))
    assert (cfg.resume, cfg.load_from) == (True, None)


def test_resume_and_no_resume_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        train_tool.parse_args(['c.py', '--resume', '--no-resume'])
    assert '--resume and --no-resume' in capsys.readouterr().err
