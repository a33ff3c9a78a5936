"""Training that survives the cluster (docs/reliability.md, "On a cluster"): SIGTERM to a
2-rank training, a worker killed under torchrun's agent with --max-restarts, and a work dir of
another training. The runs are the tiny config with dropout (so a resume that did not restore
the random generators would differ) and iterations slowed down by a hook, so that a signal
lands in the middle of the run. The first two tests read one pre-empted job (issue 47 item 3:
the suite's time): ``dist_train.sh CONFIG 2 --max-restarts 1`` stopped by SIGTERM, the same
command again, whose rank 1 is then killed and restarted by the agent, compared at the end
with an uninterrupted run."""
import os
import os.path as osp
import random
import json
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

ITERS = 12
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


CHECKPOINTS = range(4, ITERS + 1, 4)  # default_hooks.checkpoint.interval, and the last


def kill_point(resumed_from):
    """The iteration after which the second launch's rank 1 is killed: after the first
    checkpoint that launch writes, and not one iteration before the next (rank 0, which logs,
    can be an iteration ahead of rank 1, and the log line comes before that iteration's save:
    no checkpoint can be written after the newest one read at the kill)."""
    first = next(c for c in CHECKPOINTS if c > resumed_from)
    assert first < ITERS, f'stopped after iteration {resumed_from}: no room for the kill'
    return first + random.randint(1, 2)


@pytest.fixture(scope='module')
def pre_empted_job(config, tmp_path_factory):
    """``dist_train.sh CONFIG 2 --max-restarts 1``, SIGTERM to its agent after a random
    iteration k; the same command again, whose rank 1 is killed after that launch's first
    checkpoint; what each launch did (one job for both tests, whichever worker)."""
    def run(folder):
        work_dir = str(folder / 'w')
        seen = dict(work_dir=work_dir, k=random.randint(2, 3))
        log = str(folder / 'first.log')
        proc = launch(config, work_dir, log, '--max-restarts', '1')
        wait_for_iteration(proc, log, seen['k'])
        proc.send_signal(signal.SIGTERM)  # the agent: it forwards the signal to both ranks
        sent = time.time()
        seen['first_code'], seen['first'] = finish(proc, log)
        seen['stop_seconds'] = time.time() - sent
        stopped = re.search(r'SIGTERM received: stopped after iteration (\d+) and saved (\S+);',
                            seen['first'])
        if stopped and seen['first_code'] == PREEMPTED_EXIT_STATUS:
            seen['n'], path = int(stopped.group(1)), stopped.group(2)
            seen['path'] = path
            with open(osp.join(work_dir, 'last_checkpoint')) as f:
                seen['last_checkpoint'] = f.read().strip()
            if osp.isfile(path):
                checkpoint = safe_torch_load(path)
                seen['saved'] = [checkpoint['meta']['iter'], len(checkpoint['rng_states'])]
            log = str(folder / 'again.log')
            proc = launch(config, work_dir, log, '--max-restarts', '1')  # the same command
            wait_for_iteration(proc, log, kill_point(seen['n']))
            ranks = worker_pids(proc.pid)
            seen['ranks'] = sorted(ranks)
            if sorted(ranks) == [0, 1]:
                os.kill(ranks[1], signal.SIGKILL)
            # The newest checkpoint now: rank 0 cannot save another without rank 1.
            seen['newest'] = run_checkpoints(work_dir)[0]
            seen['again_code'], seen['again'] = finish(proc, log)
        (folder / 'seen.json').write_text(json.dumps(seen))

    folder = once_per_run(tmp_path_factory, 'cluster_pre_empted_job', run)
    return json.loads((folder / 'seen.json').read_text())


@pytest.mark.slow
@pytest.mark.skipif(not osp.isdir('/proc'), reason='reads the process tree from /proc (Linux)')
def test_sigterm_saves_that_iteration_and_the_same_command_finishes(pre_empted_job, reference):
    job = pre_empted_job
    k, work_dir, text = job['k'], job['work_dir'], job['first']
    assert job['first_code'] == PREEMPTED_EXIT_STATUS, \
        f'signal after iteration {k}\n' + text[-3000:]
    assert 'n' in job, text[-3000:]  # the SIGTERM line
    n, path = job['n'], job['path']
    assert k <= n < ITERS and path == osp.join(work_dir, f'iter_{n}.pth')
    assert job['stop_seconds'] < 15
    assert job['last_checkpoint'] == path
    assert job.get('saved') == [n, 2]  # its iteration, and both ranks' random generators
    # The same command again (its rank 1 killed and restarted on the way:
    # test_a_killed_worker_is_restarted_and_the_run_resumes)
    assert job['again_code'] == 0, job['again'][-3000:]
    assert f'resume: from {path}' in job['again']
    assert_same_weights(osp.join(work_dir, f'iter_{ITERS}.pth'), reference)


@pytest.mark.slow
@pytest.mark.skipif(not osp.isdir('/proc'), reason='reads the process tree from /proc (Linux)')
def test_a_killed_worker_is_restarted_and_the_run_resumes(reference, pre_empted_job):
    # (reference first: a worker running this test alone makes it while another makes the job)
    job = pre_empted_job
    assert 'ranks' in job, job['first'][-3000:]  # the second launch ran
    assert job['ranks'] == [0, 1]
    newest, text = job['newest'], job['again']
    # Written by the launch whose rank was killed (after iteration n of the first one)
    assert newest != job['path'] and int(re.search(r'iter_(\d+)', newest).group(1)) > job['n']
    assert job['again_code'] == 0, text[-3000:]
    restarted = "this job was restarted (restart 1 by torchrun's agent)"
    assert restarted in text
    assert f'resume: from {newest}' in text[text.index(restarted):]
    assert_same_weights(osp.join(job['work_dir'], f'iter_{ITERS}.pth'), reference)


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
