"""tools/sweep.py --launcher slurm through a stand-in sbatch on PATH that runs the array's
tasks here (each task: the real `irtbox sweep --run`, training and testing
the tiny config), and a stand-in srun that runs its command."""
import json
import os
import os.path as osp
import re
import stat

import pytest

from irtbox import sweeps
from irtbox.cli import sweep
from irtbox.sweeps import slurm

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')

FAKE_SBATCH = r"""#!/usr/bin/env bash
# Records its arguments, prints a job id, then runs the array's tasks here, at the same time
# (the first FAKE_SBATCH_TASKS of them: a sweep killed before the others ran).
echo "$*" >> "$FAKE_SBATCH_LOG"
job=$((1000 + $(wc -l < "$FAKE_SBATCH_LOG")))
echo "$job"
script="${@: -1}"
for a in "$@"; do case "$a" in --array=*) array="${a#--array=}";; esac; done
range="${array%%\%*}"
for i in $(seq "${range%-*}" "${range#*-}"); do
  [ "$i" -lt "${FAKE_SBATCH_TASKS:-1000}" ] || break
  SLURM_JOB_ID="${job}_$i" SLURM_ARRAY_TASK_ID=$i bash "$script" >> "$FAKE_SBATCH_OUT" 2>&1 &
done
wait
"""
FAKE_SRUN = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
exec "$@"
"""


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """sbatch and srun stand-ins first on PATH, no squeue; the sweep's spec (one loss, one
    dataset: the learning rate 1e-3 and -1, which the config check refuses, and the
    off-the-shelf test) and its work root."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    executable(bin_dir / 'sbatch', FAKE_SBATCH)
    executable(bin_dir / 'srun', FAKE_SRUN)
    monkeypatch.setenv('PATH', f'{bin_dir}:{os.environ["PATH"]}')
    monkeypatch.setenv('FAKE_SBATCH_LOG', str(tmp_path / 'sbatch.log'))
    monkeypatch.setenv('FAKE_SBATCH_OUT', str(tmp_path / 'tasks.out'))
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


def submissions(tmp_path):
    """Per sbatch call: (its arguments, the work dirs of its array's tasks)."""
    calls = []
    for line in (tmp_path / 'sbatch.log').read_text().splitlines():
        script = line.split()[-1]
        runs = re.search(r'RUNS=\(\n(.*?)\n\)', open(script).read(), re.S).group(1).split()
        calls.append((line, runs))
    return calls


def test_sweep_as_a_job_array_resubmits_only_the_unfinished(cluster, monkeypatch, capsys):
    spec, root, tmp_path = cluster
    runs = sweeps.expand(sweeps.load_spec(spec), root)
    good, bad = (next(r for r in runs if r.value == v) for v in (0.001, -1))
    shelf = next(r for r in runs if r.factor == sweeps.OFF_THE_SHELF)
    monkeypatch.setenv('FAKE_SBATCH_TASKS', '1')  # the sweep was killed after its first task
    sweep.main([spec, '--work-root', root, '--launcher', 'slurm', '--partition', 'p',
                '--max-parallel', '2', '--sbatch-args=--time=1:00:00'])
    (args, first), = submissions(tmp_path)
    assert sorted(first) == sorted(r.work_dir for r in runs)
    assert '--array=0-2%2' in args and '-p p' in args and '--requeue' in args
    assert '--signal=USR1@120' in args and '--time=1:00:00' in args
    done = [r for r in runs if sweeps.state_of(r) == 'done']
    assert [r.work_dir for r in done] == first[:1], (tmp_path / 'tasks.out').read_text()[-3000:]

    capsys.readouterr()
    counts = sweep.main(['status', spec, '--work-root', root])
    assert counts == dict(done=1, running=0, failed=0, pending=2)
    assert 'submitted as 1001_1 (squeue unavailable' in capsys.readouterr().out

    monkeypatch.delenv('FAKE_SBATCH_TASKS')
    sweep.main([spec, '--work-root', root, '--launcher', 'slurm', '--partition', 'p'])
    (_, again), = submissions(tmp_path)[1:]
    assert sorted(again) == sorted(first[1:])  # only what was not done
    out = (tmp_path / 'tasks.out').read_text()
    assert {sweeps.state_of(r) for r in (good, shelf)} == {'done'}, out[-3000:]
    assert sweeps.state_of(bad) == 'failed'
    assert 'optim_wrapper.optimizer.lr' in open(osp.join(bad.work_dir, sweeps.LOG)).read()
    assert f'{bad.work_dir}: failed (exit status 1' in out
    capsys.readouterr()
    assert sweep.main(['status', spec, '--work-root', root]) == \
        dict(done=2, running=0, failed=1, pending=0)
    rows = sweep.main([spec, '--work-root', root, '--collect-only', '--no-plot'])
    assert len(rows) == 2 and osp.isfile(osp.join(root, 'summary.csv'))


def test_status_reads_the_queue(tmp_path, monkeypatch, capsys):
    """squeue's states of the recorded tasks: running / pending, and a new submission leaves
    them out."""
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    other = run._replace(value=0.2, work_dir=str(tmp_path / 'b'))
    waiting = run._replace(value=0.3, work_dir=str(tmp_path / 'c'))
    for r, task in ((run, '7_0'), (other, '7_1'), (waiting, '7_2')):
        os.makedirs(r.work_dir)
        with open(osp.join(r.work_dir, slurm.JOB_FILE), 'w') as f:
            f.write(task + '\n')
    executable(tmp_path / 'squeue', '#!/bin/sh\necho "$*" > "$0.args"\n'
               'echo "7_0 RUNNING"; echo "7_2 PENDING"\n')
    monkeypatch.setenv('PATH', f'{tmp_path}:{os.environ["PATH"]}')
    queue = slurm.queue_states([run, other, waiting])
    assert queue == {'7_0': 'RUNNING', '7_2': 'PENDING'}
    assert (tmp_path / 'squeue.args').read_text().split() == ['-h', '-r', '-o', '%i', '%T',
                                                               '-j', '7']
    assert slurm.run_status(run, queue) == ('running', 'Slurm 7_0 RUNNING')
    assert slurm.run_status(waiting, queue) == ('pending', 'Slurm 7_2 PENDING')
    assert slurm.run_status(other, queue) == ('pending', 'not started')
    assert slurm.unqueued([run, other, waiting], queue) == [other]


def test_without_sbatch_is_one_line(cluster, monkeypatch):
    spec, root, tmp_path = cluster
    monkeypatch.setenv('PATH', '/nonexistent')
    with pytest.raises(SystemExit, match='sbatch not found'):
        sweep.main([spec, '--work-root', root, '--launcher', 'slurm'])


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


@pytest.mark.parametrize('gpus,gres', [(2, '--gres=gpu:2'), (0, None)])
def test_gpus_per_run(tmp_path, monkeypatch, gpus, gres):
    import types
    seen = []

    def fake_run(command, **kwargs):
        seen.append(command)
        return types.SimpleNamespace(returncode=0, stdout='55;cluster\n', stderr='')

    monkeypatch.setattr(slurm.subprocess, 'run', fake_run)
    run = sweeps.Run('lr', 0.1, 'sop', 'contrastive', 0, 'c.py', [], str(tmp_path / 'a'))
    assert slurm.submit_array([run], 'spec.py', str(tmp_path), 'p', nproc=gpus) == '55'
    command = seen[0]
    assert [a for a in command if a.startswith('--gres')] == ([gres] if gres else [])
    assert f'--gpus {gpus} ' in open(command[-1]).read()
    assert open(osp.join(run.work_dir, slurm.JOB_FILE)).read() == '55_0\n'
