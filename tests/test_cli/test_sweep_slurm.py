"""tools/sweep.py --launcher slurm through submitit: the array's tasks run here with
submitit's local executor (each task the real RunTask, training and testing the tiny config);
the #SBATCH lines submitit writes for a cluster; the pre-emption callback with a real step
process; the queue states read from sacct."""
import json
import os
import os.path as osp
import signal
import stat

import pytest

from irtbox.ops import sweeps
from irtbox.cli import sweep
from irtbox.ops.sweeps import slurm

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def grid(tmp_path, monkeypatch):
    """The sweep's spec (one loss, one dataset: the learning rate 1e-3 and -1, which the
    config check refuses, and the off-the-shelf test) and its work root."""
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '')
    for name in ('train', 'shelf'):
        (tmp_path / f'{name}_contrastive_sop.py').write_text(f'_base_ = [{TINY_CONFIG!r}]\n')
    spec = dict(config=str(tmp_path / 'train_{loss}_{dataset}.py'),
                off_the_shelf=str(tmp_path / 'shelf_contrastive_{dataset}.py'),
                losses=['contrastive'], families=dict(contrastive='contrastive'),
                datasets=['sop'], seeds=[0],
                options=['train_cfg.max_iters=2', 'train_cfg.val_interval=100'],
                factors=dict(lr=dict(values=[0.001, -1],
                                     options=['optim_wrapper.optimizer.lr={value}'])))
    (tmp_path / 'spec.json').write_text(json.dumps(spec))
    monkeypatch.chdir(ROOT)  # the tiny config's data root is relative to it
    return str(tmp_path / 'spec.json'), str(tmp_path / 'W'), tmp_path


@pytest.mark.slow
def test_sweep_as_a_job_array_through_submitit(grid, monkeypatch, capsys):
    spec, root, tmp_path = grid
    monkeypatch.setattr(sweep, 'SLURM_CLUSTER', 'local')  # submitit runs the tasks here
    monkeypatch.delenv('SUBMITIT_PREEMPT_SIGNAL', raising=False)
    runs = sweeps.expand(sweeps.load_spec(spec), root)
    good, bad = (next(r for r in runs if r.value == v) for v in (0.001, -1))
    shelf = next(r for r in runs if r.factor == sweeps.OFF_THE_SHELF)
    with pytest.raises(SystemExit, match=r'1 run\(s\) failed'):
        sweep.main([spec, '--work-root', root, '--launcher', 'slurm', '--max-parallel', '2',
                    '--wait', '--no-plot'])
    assert 'submitting 3' in capsys.readouterr().err
    assert {sweeps.state_of(r) for r in (good, shelf)} == {'done'}
    assert sweeps.state_of(bad) == 'failed'
    assert 'optim_wrapper.optimizer.lr' in open(osp.join(bad.work_dir, sweeps.LOG)).read()
    for run in runs:  # each run records its submitit job
        kind, job_id = open(osp.join(run.work_dir, slurm.JOB_FILE)).read().split()
        assert kind == 'local' and osp.isdir(osp.join(root, slurm.JOBS_DIR, job_id))
    assert sweep.main(['status', spec, '--work-root', root]) == \
        dict(done=2, running=0, failed=1, pending=0)
    assert slurm.unqueued(runs, {}) == [bad]  # what a new submission sends
    assert osp.isfile(osp.join(root, 'summary.csv'))


SBATCH = """#!/bin/sh
cp "$1" "$0.script"
echo "Submitted batch job 4242"
"""


def test_the_array_submitit_writes_for_slurm(tmp_path, monkeypatch):
    """The #SBATCH lines of the array: the throttle, partition, GPUs, the USR1 warning that
    PreemptionHook saves on, the requeue and the extra options (submitit's own sbatch call,
    answered by a stand-in that keeps the script)."""
    executable(tmp_path / 'sbatch', SBATCH)
    executable(tmp_path / 'srun', '#!/bin/sh\n')
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    monkeypatch.delenv('SUBMITIT_PREEMPT_SIGNAL', raising=False)  # put back afterwards
    executor = slurm.make_executor(str(tmp_path / 'W'), 'p', nproc=2, max_parallel=1,
                                   timeout_min=90, slurm_params=dict(qos='high'))
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    other = run._replace(value=0.2, work_dir=str(tmp_path / 'b'))
    jobs = slurm.submit_runs(executor, [run, other])
    assert [job.job_id for job in jobs] == ['4242_0', '4242_1']
    assert open(osp.join(other.work_dir, slurm.JOB_FILE)).read() == 'slurm 4242_1\n'
    lines = set((tmp_path / 'sbatch.script').read_text().splitlines())
    assert {'#SBATCH --array=0-1%1', '#SBATCH --partition=p', '#SBATCH --gpus-per-node=2',
            '#SBATCH --signal=USR1@120', '#SBATCH --time=90', '#SBATCH --qos=high',
            '#SBATCH --requeue'} <= lines
    # The tasks inherit the environment (sbatch's default): their submitit handles USR1 too.
    assert os.environ['SUBMITIT_PREEMPT_SIGNAL'] == 'USR1'


def test_a_refused_array_is_one_line(grid, monkeypatch):
    spec, root, tmp_path = grid
    executable(tmp_path / 'sbatch', '#!/bin/sh\necho "sbatch: error: invalid partition" >&2\n'
               'exit 1\n')
    executable(tmp_path / 'srun', '#!/bin/sh\n')
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    monkeypatch.delenv('SUBMITIT_PREEMPT_SIGNAL', raising=False)
    with pytest.raises(SystemExit, match='^--launcher slurm: sbatch refused the array: '
                       'sbatch: error: invalid partition$'):
        sweep.main([spec, '--work-root', root, '--launcher', 'slurm', '--partition', 'nope'])


def test_without_slurm_is_one_line(grid, monkeypatch):
    spec, root, _ = grid
    monkeypatch.setenv('PATH', '/nonexistent')
    with pytest.raises(SystemExit, match='--launcher slurm: cannot submit to Slurm here'):
        sweep.main([spec, '--work-root', root, '--launcher', 'slurm'])


def test_without_submitit_is_one_line(grid, monkeypatch, capsys):
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec',
                        lambda name, *a: None if name == 'submitit' else find_spec(name, *a))
    spec, root, _ = grid
    with pytest.raises(SystemExit, match=r'needs submitit, .*pip install "irtbox\[slurm\]"'):
        sweep.main([spec, '--work-root', root, '--launcher', 'slurm'])
    printed = capsys.readouterr()
    assert printed.out == printed.err == ''  # no "submitting 9" before the refusal


def test_slurm_params_are_key_value(grid, capsys):
    spec, root, _ = grid
    with pytest.raises(SystemExit):
        sweep.main([spec, '--work-root', root, '--launcher', 'slurm', '--slurm-params', 'qos'])
    assert "--slurm-params: expected KEY=VALUE, got 'qos'" in capsys.readouterr().err


FAKE_PYTHON = """#!/bin/bash
# A training step: saves and exits 75 on SIGUSR1 (as PreemptionHook does).
trap 'exit 75' USR1
sleep 30 & wait
"""


def test_pre_emption_waits_for_the_training_then_requeues(tmp_path, monkeypatch):
    """submitit's callback, called from a signal handler while the task waits for its
    training step: the step gets the signal, ends with status 75, the run is marked to resume
    and the same call is requeued."""
    import submitit
    executable(tmp_path / 'python', FAKE_PYTHON)
    monkeypatch.setattr(sweeps.execute.sys, 'executable', str(tmp_path / 'python'))
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    task, requeued = slurm.RunTask(), []

    class Requeued(Exception):  # submitit ends the task from its handler
        pass

    def handler(signum, frame):
        requeued.append(task.checkpoint(run))
        raise Requeued

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(Requeued):
            task(run)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    delayed, = requeued
    assert isinstance(delayed, submitit.helpers.DelayedSubmission)
    assert delayed.function is task and delayed.args == (run,)
    assert osp.isfile(osp.join(run.work_dir, sweeps.PREEMPTED_MARK))
    assert sweeps.state_of(run) == 'todo'


SACCT = """#!/bin/sh
echo "JobID|State|NodeList"
echo "7_0|RUNNING|n1"
echo "7_1|COMPLETED|n2"
echo "7_2|PENDING|None assigned"
"""


def test_status_reads_the_job_states(tmp_path, monkeypatch):
    """submitit's job states (sacct): running / pending, and a new submission leaves them
    out; a finished task whose run has no results is pending."""
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    other = run._replace(value=0.2, work_dir=str(tmp_path / 'b'))
    waiting = run._replace(value=0.3, work_dir=str(tmp_path / 'c'))
    for r, task in ((run, '7_0'), (other, '7_1'), (waiting, '7_2')):
        os.makedirs(r.work_dir)
        with open(osp.join(r.work_dir, slurm.JOB_FILE), 'w') as f:
            f.write(f'slurm {task}\n')
    executable(tmp_path / 'sacct', SACCT)
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    queue = slurm.queue_states([run, other, waiting], str(tmp_path))
    assert queue == {'7_0': 'RUNNING', '7_2': 'PENDING'}
    assert slurm.run_status(run, queue) == ('running', 'Slurm 7_0 RUNNING')
    assert slurm.run_status(waiting, queue) == ('pending', 'Slurm 7_2 PENDING')
    assert slurm.run_status(other, queue) == ('pending', 'not started')
    open(osp.join(other.work_dir, 'iter_5.pth'), 'w').close()  # an attempt that stopped
    open(osp.join(other.work_dir, 'iter_10.pth'), 'w').close()
    assert slurm.run_status(other, queue) == (
        'pending', 'started, not finished: iter_10.pth saved, which the next attempt resumes from')
    assert slurm.unqueued([run, other, waiting], queue) == [other]
    monkeypatch.setenv('PATH', '/nonexistent')
    assert slurm.queue_states([run], str(tmp_path)) is None
    assert 'submitted as 7_0 (sacct unavailable' in slurm.run_status(run, None)[1]


def test_a_pre_empted_training_resumes_at_the_next_attempt(tmp_path, monkeypatch):
    """Exit status 75 is not a failure: the run stays unfinished, marked, and its next
    training is started with --resume (a requeued Slurm task resumes anyway)."""
    import subprocess
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    calls = []

    def fake_run(cmd, check, env, stdout=None, stderr=None):
        calls.append(cmd)
        if cmd[3] == 'train' and len(calls) == 1:
            raise subprocess.CalledProcessError(75, cmd)
        if cmd[3] == 'train':
            (tmp_path / 'a' / 'last_checkpoint').write_text('iter_4.pth')
        else:
            (tmp_path / 'a' / sweeps.RESULTS).write_text('{}')

    monkeypatch.setattr(sweeps.execute.subprocess, 'run', fake_run)
    assert sweeps.execute.attempt(run) == 'pre-empted'
    assert sweeps.state_of(run) == 'todo'
    assert osp.isfile(osp.join(run.work_dir, sweeps.PREEMPTED_MARK))
    assert '--resume' not in calls[0]
    assert sweeps.execute.attempt(run) is None
    assert calls[1][3] == 'train' and calls[1][-1] == '--resume'
    assert sweeps.state_of(run) == 'done'
    assert not osp.exists(osp.join(run.work_dir, sweeps.PREEMPTED_MARK))


def test_a_step_ended_by_a_signal_is_no_failure(tmp_path, monkeypatch):
    """A test step killed by SIGUSR1 (it saves nothing) is 'interrupted': no failed file, no
    mark; a step that failed is recorded."""
    import signal
    import subprocess
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    os.makedirs(run.work_dir)
    (tmp_path / 'a' / sweeps.TRAIN_DONE).write_text('')
    (tmp_path / 'a' / 'last_checkpoint').write_text('iter_4.pth')
    codes = iter([-signal.SIGUSR1, 3])

    def fake_run(cmd, check, env, stdout=None, stderr=None):
        raise subprocess.CalledProcessError(next(codes), cmd)

    monkeypatch.setattr(sweeps.execute.subprocess, 'run', fake_run)
    assert sweeps.execute.attempt(run) == 'interrupted'
    assert sorted(os.listdir(run.work_dir)) == ['last_checkpoint', sweeps.LOG, sweeps.TRAIN_DONE]
    assert sweeps.execute.attempt(run).startswith('exit status 3: ')
    assert sweeps.state_of(run) == 'failed'


@pytest.mark.parametrize('under_submitit', [False, True])
def test_a_pre_empted_training_requeues_itself_unless_submitit_does(tmp_path, monkeypatch,
                                                                    under_submitit):
    """A training of tools/slurm_train.sh requeues its job after saving; in a sweep's
    submitit task it leaves that to submitit, so that the job is requeued once."""
    import logging
    from irtbox import apis
    from irtbox.cli import train
    from irtbox.engine import Preempted
    from irtbox.engine.hooks import preemption

    class PreemptedRunner:
        logger = logging.getLogger('test')

        def register_hook(self, hook):  # the command's header
            pass

        def train(self):
            raise Preempted('saved iter_2.pth', 'SIGUSR1', 'iter_2.pth')

    monkeypatch.setattr(apis, 'build_runner', lambda cfg: PreemptedRunner())
    requeues = []
    monkeypatch.setattr(preemption, 'requeue_slurm_job', lambda: requeues.append(1) or 'done')
    if under_submitit:
        monkeypatch.setenv('SUBMITIT_EXECUTOR', 'slurm')
    else:
        monkeypatch.delenv('SUBMITIT_EXECUTOR', raising=False)
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stop:
        train.main([TINY_CONFIG, '--work-dir', str(tmp_path)])
    assert stop.value.code == 75
    assert requeues == ([] if under_submitit else [1])
