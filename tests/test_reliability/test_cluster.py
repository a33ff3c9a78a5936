"""Training that survives the cluster (docs/reliability.md, "On a cluster"): SIGTERM to a
2-rank training, a worker killed under torchrun's agent with --max-restarts, and a work dir of
another training. The runs are the tiny config with dropout (so a resume that did not restore
the random generators would differ) and iterations slowed down by a hook, so that a signal
lands in the middle of the run."""
import os
import os.path as osp
import random
import re
import signal
import subprocess
import time

import pytest
import torch

from tests.shared_runs import dist_train, once_per_run
from tests.test_reliability.reliability_helpers import TINY_CONFIG, descendants

from irtbox.cli import train as train_tool
from irtbox.engine import PREEMPTED_EXIT_STATUS
from irtbox.engine.runner import run_checkpoints
from irtbox.utils.checkpoint import safe_torch_load

ITERS = 10
CONFIG = f"""_base_ = [{TINY_CONFIG!r}]
custom_imports = dict(imports=['tests.test_reliability.slow_iterations'],
                      allow_failed_imports=False)
custom_hooks = [dict(type='SlowIterationsHook', seconds=0.25)]
model = dict(backbone=dict(proj_drop_rate=0.2))
train_cfg = dict(max_iters={ITERS}, val_interval=1000)
default_hooks = dict(checkpoint=dict(interval=4, max_keep_ckpts=5))
"""


@pytest.fixture(scope='module')
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp('config') / 'slow_tiny.py'
    path.write_text(CONFIG)
    return str(path)


def launch(config, work_dir, log_path, *extra):
    """``tools/dist_train.sh CONFIG 2`` in the background (its process is the torchrun agent)."""
    return dist_train(config, work_dir, *extra, env=dict(TORCH_ELASTIC_SHUTDOWN_TIMEOUT='15'),
                      stdout=open(log_path, 'w'), stderr=subprocess.STDOUT,
                      start_new_session=True)


def finish(proc, log_path, timeout=120):
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f'no end in {timeout} s:\n' + open(log_path).read()[-3000:])
    return proc.returncode, open(log_path).read()


def wait_for_iteration(proc, log_path, k, timeout=120):
    deadline = time.time() + timeout
    pattern = re.compile(rf'Iter\(train\) \[\s*{k}/{ITERS}\]')
    while not pattern.search(open(log_path).read()):
        if proc.poll() is not None or time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f'iteration {k} never logged:\n' + open(log_path).read()[-3000:])
        time.sleep(0.05)


def weights(path):
    return safe_torch_load(path)['state_dict']


def assert_same_weights(path, reference):
    state = weights(path)
    assert state.keys() == reference.keys()
    for key, value in reference.items():
        torch.testing.assert_close(state[key], value, rtol=0, atol=0, msg=key)


@pytest.fixture(scope='module')
def reference(config, tmp_path_factory):
    """The uninterrupted run's final weights (one run for both tests, whichever worker);
    without the slowing hook, which only sleeps (nothing signals this run)."""
    def train(folder):
        log = str(folder / 'log')
        code, text = finish(launch(config, str(folder / 'w'), log, '--cfg-options',
                                   'custom_hooks=[]'), log)
        assert code == 0, text[-3000:]

    folder = once_per_run(tmp_path_factory, 'cluster_reference', train)
    return weights(str(folder / 'w' / f'iter_{ITERS}.pth'))


def worker_pids(pid):
    """The ranks under the agent ``pid``: {RANK: pid}."""
    found = {}
    for child in descendants(pid):
        try:
            with open(f'/proc/{child}/environ', 'rb') as f:
                env = dict(item.split(b'=', 1) for item in f.read().split(b'\0') if b'=' in item)
        except (FileNotFoundError, ProcessLookupError):
            continue
        if b'RANK' in env and b'TORCHELASTIC_RUN_ID' in env:
            found[int(env[b'RANK'])] = child
    return found


@pytest.mark.slow
@pytest.mark.skipif(not osp.isdir('/proc'), reason='reads the process tree from /proc (Linux)')
def test_sigterm_saves_that_iteration_and_the_same_command_finishes(config, reference, tmp_path):
    k = random.randint(2, ITERS - 4)  # the iteration logged when the signal is sent
    work_dir, log = str(tmp_path / 'w'), str(tmp_path / 'log')
    proc = launch(config, work_dir, log)
    wait_for_iteration(proc, log, k)
    proc.send_signal(signal.SIGTERM)  # the agent: it forwards the signal to both ranks
    sent = time.time()
    code, text = finish(proc, log)
    assert code == PREEMPTED_EXIT_STATUS, f'signal after iteration {k}\n' + text[-3000:]
    stopped = re.search(r'SIGTERM received: stopped after iteration (\d+) and saved (\S+);', text)
    assert stopped, text[-3000:]
    n, path = int(stopped.group(1)), stopped.group(2)
    assert k <= n < ITERS and path == osp.join(work_dir, f'iter_{n}.pth')
    assert time.time() - sent < 15
    assert open(osp.join(work_dir, 'last_checkpoint')).read().strip() == path
    checkpoint = safe_torch_load(path)
    assert checkpoint['meta']['iter'] == n and len(checkpoint['rng_states']) == 2

    again = tmp_path / 'again.log'
    code, text = finish(launch(config, work_dir, str(again)), str(again))
    assert code == 0, text[-3000:]
    assert f'resume: from {path}' in text
    assert_same_weights(osp.join(work_dir, f'iter_{ITERS}.pth'), reference)


@pytest.mark.slow
@pytest.mark.skipif(not osp.isdir('/proc'), reason='reads the process tree from /proc (Linux)')
def test_a_killed_worker_is_restarted_and_the_run_resumes(config, reference, tmp_path):
    work_dir, log = str(tmp_path / 'w'), str(tmp_path / 'log')
    proc = launch(config, work_dir, log, '--max-restarts', '1')
    wait_for_iteration(proc, log, random.randint(5, 6))  # after the checkpoint of iteration 4
    ranks = worker_pids(proc.pid)
    assert sorted(ranks) == [0, 1], ranks
    os.kill(ranks[1], signal.SIGKILL)
    # The newest checkpoint now (iteration 4, or 8 on a slow machine): rank 0 cannot save
    # another without rank 1.
    newest = run_checkpoints(work_dir)[0]
    code, text = finish(proc, log)
    assert code == 0, text[-3000:]
    assert "this job was restarted (restart 1 by torchrun's agent)" in text
    assert f'resume: from {newest}' in text
    assert_same_weights(osp.join(work_dir, f'iter_{ITERS}.pth'), reference)


@pytest.mark.slow
def test_another_trainings_work_dir_is_refused(tmp_path, in_root):
    work_dir = str(tmp_path / 'w')
    train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--cfg-options',
                     'train_cfg.max_iters=1'])
    # (A longer schedule of the same training resumes: test_train_test.py's resume tests.)
    with pytest.raises(SystemExit) as refused:
        train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--resume', '--cfg-options',
                         'model.head.loss_weights.koleo=0.5'])
    message = str(refused.value.code)
    assert 'iter_1.pth: it was written by another training' in message
    assert 'model.head.loss_weights.koleo: 0.7 in the checkpoint, 0.5 in this config' in message
    assert '--no-resume to start over' in message
