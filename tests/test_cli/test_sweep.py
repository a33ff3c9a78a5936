"""tools/sweep.py on fake runs: expansion, resume (finished runs skipped), tables, figures."""
import csv
import json
import os
import os.path as osp
import re
import statistics
import subprocess
import types

import pytest

from irtbox.ops import sweeps
from irtbox.cli import sweep
from irtbox.cli import plot_sweep

SPEC = dict(
    config='configs/dml_benchmark/{loss}_{dataset}.py',
    losses=['ArcFace', 'MultiSimilarity'],
    datasets=['cars196', 'cub200'],
    seeds=[0, 1, 2],
    options=['train_cfg.max_iters=20'],
    factors=dict(
        batch_size=dict(values=[32, 64], options=['train_dataloader.batch_size={value}',
                                                  'train_dataloader.sampler.batch_size={value}']),
        model_lr=dict(values=[1e-06, 0.0001], options=['optim_wrapper.optimizer.lr={value}'],
                      log_x=True)),
    off_the_shelf='configs/dml_benchmark/off_the_shelf_{dataset}.py',
)


def write_spec(tmp_path, spec=SPEC, name='grid.json'):
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return str(path)


def fake_metrics(run):
    """Distinct, recomputable metrics per run."""
    base = 0.1 * (run.seed or 0) + (0.5 if run.loss == 'ArcFace' else 0.3)
    return {'precision@1': base + 0.01 * len(run.dataset), 'map@r': base / 2}


def test_expansion(tmp_path):
    runs = sweeps.expand(sweeps.load_spec(write_spec(tmp_path)), 'W')
    trained = [r for r in runs if r.factor != sweeps.OFF_THE_SHELF]
    assert len(trained) == 2 * (2 * 2 * 2 * 3)
    assert len(runs) - len(trained) == 2
    assert len({r.work_dir for r in runs}) == len(runs)
    run = next(r for r in runs if r.factor == 'model_lr' and r.value == 1e-06
               and r.dataset == 'cub200' and r.loss == 'ArcFace' and r.seed == 2)
    assert run.config == 'configs/dml_benchmark/ArcFace_cub200.py'
    assert run.options == ['train_cfg.max_iters=20', 'optim_wrapper.optimizer.lr=1e-06',
                           'randomness.seed=2']
    assert run.work_dir == osp.join('W', 'model_lr', '1e-06', 'cub200', 'ArcFace', 'seed2')
    shelf = [r for r in runs if r.factor == sweeps.OFF_THE_SHELF]
    assert [r.config for r in shelf] == ['configs/dml_benchmark/off_the_shelf_cars196.py',
                                        'configs/dml_benchmark/off_the_shelf_cub200.py']
    assert sweeps.family_of('ArcFace') == 'classification'
    assert sweeps.family_of('multi_similarity') == 'contrastive'


@pytest.mark.parametrize('change,message', [
    (dict(factors=None), 'factors'),
    (dict(losses=['MyLoss']), "'MyLoss' has no family"),
    (dict(factors=dict(m=dict(values=[1], options=['sampler.m=4']))), "'{value}'"),
    (dict(factors=dict(m=dict(values=[], options=['x={value}']))), 'factors.m'),
])
def test_bad_specs(tmp_path, change, message):
    spec = {**SPEC, **change}
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(ValueError, match=message):
        sweeps.load_spec(write_spec(tmp_path, spec))


def test_spec_families_and_python_spec(tmp_path):
    path = tmp_path / 'grid.py'
    path.write_text("config = 'c_{loss}_{dataset}.py'\nlosses = ['MyLoss']\ndatasets = ['d']\n"
                    "families = dict(MyLoss='contrastive')\n"
                    "factors = dict(m=dict(values=[1, 2], options=['sampler.m={value}']))\n")
    runs = sweeps.expand(sweeps.load_spec(str(path)), 'W')
    assert [r.options for r in runs] == [['sampler.m=1', 'randomness.seed=0'],
                                         ['sampler.m=2', 'randomness.seed=0']]


def fake_subprocess(monkeypatch, tmp_path, runs):
    """Replaces the train/test subprocesses; returns the list of (tool, work dir, command)."""
    by_dir = {r.work_dir: r for r in runs}
    calls = []

    def fake_run(cmd, check, env, stdout=None, stderr=None):
        tool, work_dir = cmd[3], cmd[cmd.index('--work-dir') + 1]
        if tool == 'test':
            # As tools/test.py: a .npz --out also gets its metrics as <name>.json.
            work_dir, out = osp.dirname(work_dir), cmd[cmd.index('--out') + 1]
            if out.endswith('.npz'):
                (tmp_path / out).write_text('embeddings')
            (tmp_path / (osp.splitext(out)[0] + '.json')).write_text(
                json.dumps(fake_metrics(by_dir[work_dir])))
        else:
            (tmp_path / work_dir / 'last_checkpoint').write_text(osp.join(work_dir, 'iter_20.pth'))
        calls.append((tool, work_dir, cmd))

    # Only the sweep's own subprocess calls (matplotlib, say, runs fc-list through the real one).
    monkeypatch.setattr(sweeps.execute, 'subprocess', types.SimpleNamespace(
        run=fake_run, STDOUT=subprocess.STDOUT, CalledProcessError=subprocess.CalledProcessError))
    return calls


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    """A spec with some runs finished, some trained only; subprocess calls are recorded."""
    spec_path = write_spec(tmp_path)
    root = str(tmp_path / 'W')
    runs = sweeps.expand(sweeps.load_spec(spec_path), root)
    done, trained = runs[::5], runs[1::7]
    for run in done:
        (tmp_path / run.work_dir).mkdir(parents=True, exist_ok=True)
        (tmp_path / run.work_dir / sweeps.RESULTS).write_text(json.dumps(fake_metrics(run)))
    done_dirs = {r.work_dir for r in done}
    trained = [r for r in trained if r.work_dir not in done_dirs]
    for run in trained:
        (tmp_path / run.work_dir).mkdir(parents=True, exist_ok=True)
        (tmp_path / run.work_dir / sweeps.TRAIN_DONE).write_text('')
        if run.factor != sweeps.OFF_THE_SHELF:
            (tmp_path / run.work_dir / 'best.pth').write_text('')
    calls = fake_subprocess(monkeypatch, tmp_path, runs)
    monkeypatch.chdir(tmp_path)
    return spec_path, root, runs, done, trained, calls


@pytest.mark.slow
def test_resume_skips_finished_runs(fake_sweep):
    spec_path, root, runs, done, trained, calls = fake_sweep
    sweep.main([spec_path, '--work-root', root, '--no-plot'])
    trains = {d for tool, d, _ in calls if tool == 'train'}
    tests = {d: cmd for tool, d, cmd in calls if tool == 'test'}
    finished = {r.work_dir for r in done}
    skip_train = finished | {r.work_dir for r in trained}
    assert trains == {r.work_dir for r in runs if r.work_dir not in skip_train
                      and r.factor != sweeps.OFF_THE_SHELF}
    assert set(tests) == {r.work_dir for r in runs if r.work_dir not in finished}
    for run in trained:   # tested on the early-stopping checkpoint, trained no more
        if run.factor != sweeps.OFF_THE_SHELF:
            assert osp.join(run.work_dir, 'best.pth') in tests[run.work_dir]
    todo = next(r for r in runs if r.work_dir in trains)
    assert osp.join(todo.work_dir, 'iter_20.pth') in tests[todo.work_dir]
    for work_dir, cmd in tests.items():   # metrics only: no embeddings written
        assert cmd[cmd.index('--out') + 1] == osp.join(work_dir, 'test_results.json')
    assert not any(osp.exists(osp.join(r.work_dir, 'test_results.npz')) for r in runs)
    calls.clear()
    sweep.main([spec_path, '--work-root', root, '--no-plot'])   # all finished now
    assert calls == []


@pytest.mark.slow
def test_failed_runs_do_not_stop_the_sweep_and_are_retried(fake_sweep, monkeypatch, capsys):
    spec_path, root, runs, done, trained, calls = fake_sweep
    todo = [r for r in runs if sweeps.state_of(r) == 'todo']
    broken = {todo[0].work_dir, todo[-1].work_dir}
    fake_run = sweeps.execute.subprocess.run

    def failing_run(cmd, check, env, stdout=None, stderr=None):
        if cmd[cmd.index('--work-dir') + 1] in broken and cmd[3] == 'train':
            stdout.write('ValueError: the reason\n')
            raise sweeps.execute.subprocess.CalledProcessError(3, cmd)
        return fake_run(cmd, check, env)

    monkeypatch.setattr(sweeps.execute.subprocess, 'run', failing_run)
    with pytest.raises(SystemExit, match=r'2 run\(s\) failed') as exit_info:
        sweep.main([spec_path, '--work-root', root, '--no-plot'])
    assert all(d in str(exit_info.value) for d in broken)
    assert capsys.readouterr().err.count('FAILED (exit status 3: ') == 2
    for run in runs:
        state = sweeps.state_of(run)
        assert state == ('failed' if run.work_dir in broken else 'done'), run.work_dir
    marker = open(osp.join(sorted(broken)[0], sweeps.FAILED)).read()
    assert marker.startswith('exit status 3: ') and '-m irtbox train' in marker
    # The tables hold every run that finished.
    with open(osp.join(root, 'runs.json')) as f:
        assert len(json.load(f)) == len(runs) - 2
    # The next call retries only the failed runs.
    calls.clear()
    broken.clear()
    sweep.main([spec_path, '--work-root', root, '--no-plot'])
    assert {d for tool, d, _ in calls if tool == 'train'} == {todo[0].work_dir,
                                                                 todo[-1].work_dir}
    assert all(sweeps.state_of(r) == 'done' for r in runs)


def test_missing_checkpoint_and_interruption(fake_sweep, monkeypatch):
    spec_path, root, runs, done, trained, calls = fake_sweep
    fake_run = sweeps.execute.subprocess.run
    todo = [r for r in runs if sweeps.state_of(r) == 'todo']
    started = []

    def run_without_checkpoints(cmd, check, env, stdout=None, stderr=None):
        started.append(cmd[cmd.index('--work-dir') + 1])
        result = fake_run(cmd, check, env)
        if cmd[3] == 'train' and started[-1] == todo[0].work_dir:
            os.remove(osp.join(started[-1], 'last_checkpoint'))
        if cmd[3] == 'train' and started[-1] == todo[1].work_dir:
            raise KeyboardInterrupt
        return result

    monkeypatch.setattr(sweeps.execute.subprocess, 'run', run_without_checkpoints)
    with pytest.raises(SystemExit, match='interrupted: finished runs are kept'):
        sweep.main([spec_path, '--work-root', root, '--no-plot'])
    assert sweeps.state_of(todo[0]) == 'failed'
    assert 'neither best.pth nor last_checkpoint' in open(
        osp.join(todo[0].work_dir, sweeps.FAILED)).read()
    # Nothing started after the interruption.
    assert started[-1] == todo[1].work_dir
    assert all(sweeps.state_of(r) == 'todo' for r in todo[2:])


def test_parallel_jobs_get_their_own_gpu_and_threads(fake_sweep, monkeypatch, capsys):
    import threading
    spec_path, root, runs, done, trained, calls = fake_sweep
    fake_run = sweeps.execute.subprocess.run
    together = threading.Barrier(2, timeout=10)
    envs = []

    def recording_run(cmd, check, env, stdout=None, stderr=None):
        if cmd[3] == 'train' and not envs:
            envs.append(env)
            together.wait()   # the second job must be running now, or this times out
        elif cmd[3] == 'train' and len(envs) == 1:
            envs.append(env)
            together.wait()
        return fake_run(cmd, check, env)

    monkeypatch.setattr(sweeps.execute.subprocess, 'run', recording_run)
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '4,7')
    monkeypatch.setattr(sweeps.execute, 'usable_cpu_count', lambda: 8)
    sweep.main([spec_path, '--work-root', root, '--no-plot', '--jobs', '2'])
    assert sorted(e['CUDA_VISIBLE_DEVICES'] for e in envs) == ['4', '7']
    assert all(e['OMP_NUM_THREADS'] == '4' for e in envs)
    # The runs end with the sweep (irtbox's commands arm PR_SET_PDEATHSIG on it).
    assert all(e['IRTBOX_EXIT_WITH_PARENT'] == '1' for e in envs)
    assert all(sweeps.state_of(r) == 'done' for r in runs)
    with pytest.raises(SystemExit):
        sweep.main([spec_path, '--work-root', root, '--jobs', '0'])
    assert 'argument --jobs: the value must be a positive integer, got 0' in \
        capsys.readouterr().err


@pytest.mark.parametrize('visible, count, jobs, expected', [
    ('4,7', 0, 5, ['4', '7', '4', '7', '4']),
    (None, 3, 4, ['0', '1', '2', '0']),
    (None, 0, 3, [None, None, None]),
    ('', 8, 2, [None, None]),
    ('-1', 8, 2, [None, None]),
])
def test_more_jobs_than_gpus_share_them_in_turn(monkeypatch, visible, count, jobs, expected):
    """Before: with more jobs than GPUs no job got a device, and every run used cuda:0."""
    import torch
    if visible is None:
        monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
    else:
        monkeypatch.setenv('CUDA_VISIBLE_DEVICES', visible)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: count)
    assert sweeps.execute._job_devices(jobs) == expected


def test_factor_restricted_to_some_losses(tmp_path):
    spec = dict(config='c_{loss}_{dataset}.py', losses=['arcface', 'ntxent'], datasets=['a'],
                seeds=[0, 1], factors=dict(
                    clf_lr=dict(values=[0.1, 1.0], losses=['arcface'],
                                options=['optim_wrapper.paramwise_cfg.custom_keys.x.lr={value}']),
                    m=dict(values=[2, 4], options=['train_dataloader.sampler.m={value}'])))
    path = tmp_path / 'spec.json'
    path.write_text(json.dumps(spec))
    runs = sweeps.expand(sweeps.load_spec(str(path)), 'W')
    assert {(r.factor, r.loss) for r in runs} == {
        ('clf_lr', 'arcface'), ('m', 'arcface'), ('m', 'ntxent')}
    assert len(runs) == 2 * 1 * 2 + 2 * 2 * 2
    spec['factors']['clf_lr']['losses'] = ['cosface']
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r'spec.json: factors.clf_lr.losses must be .*cosface'):
        sweeps.load_spec(str(path))


def test_tables(fake_sweep, capsys):
    spec_path, root, runs, *_ = fake_sweep
    sweep.main([spec_path, '--work-root', root, '--no-plot'])
    # The table docs/sweeps.md shows: per factor, dataset and metric, the mean over seeds of
    # each loss and value, one decimal; the off-the-shelf model's row last.
    out = capsys.readouterr().out
    title = 'precision@1 (%) against model_lr on cub200, mean over 3 seed(s):'
    block = out[out.index(title):].split('\n\n')[0]
    lines = block.splitlines()[1:]
    assert lines[0].split() == ['model_lr', '1e-06', '0.0001']

    def mean_of(**where):
        return statistics.mean(fake_metrics(r)['precision@1'] for r in runs
                               if all(getattr(r, k) == v for k, v in where.items()))
    for line, loss in zip(lines[1:3], SPEC['losses']):
        assert line.split() == [loss] + [
            f'{mean_of(factor="model_lr", value=v, dataset="cub200", loss=loss):.1f}'
            for v in (1e-06, 0.0001)]
    assert lines[3].split() == [
        'off-the-shelf', f'{mean_of(factor=sweeps.OFF_THE_SHELF, dataset="cub200"):.1f}']
    with open(osp.join(root, 'runs.csv'), newline='') as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(runs)
    with open(osp.join(root, 'runs.json')) as f:
        assert len(json.load(f)) == len(runs)
    by_dir = {r.work_dir: r for r in runs}
    for row in rows:
        expected = fake_metrics(by_dir[row['work_dir']])
        assert float(row['precision@1']) == pytest.approx(expected['precision@1'])
        assert float(row['map@r']) == pytest.approx(expected['map@r'])
    with open(osp.join(root, 'summary.csv'), newline='') as f:
        summary = list(csv.DictReader(f))
    assert len(summary) == 2 * (2 * 2 * 2 * 2 + 2)   # metrics x (runs over seeds + shelf)
    row = next(s for s in summary if s['factor'] == 'batch_size' and s['value'] == '64'
               and s['dataset'] == 'cars196' and s['loss'] == 'MultiSimilarity'
               and s['metric'] == 'precision@1')
    vals = [fake_metrics(r)['precision@1'] for r in runs if r.factor == 'batch_size'
            and r.value == 64 and r.dataset == 'cars196' and r.loss == 'MultiSimilarity']
    assert int(row['n']) == 3 and row['family'] == 'contrastive'
    # Rounded to 2 decimals (percent: 89.49), so that the file reads as a table.
    assert float(row['mean']) == round(statistics.mean(vals), 2)
    assert float(row['std']) == round(statistics.pstdev(vals), 2)
    assert (float(row['min']), float(row['max'])) == (round(min(vals), 2), round(max(vals), 2))
    assert all(len(s[k].partition('.')[2]) <= 2 for s in summary for k in ('mean', 'std'))


def test_emit_only_unfinished(fake_sweep):
    spec_path, root, runs, done, trained, calls = fake_sweep
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        sweep.main([spec_path, '--work-root', root, '--emit', 'dist', '--gpus', '4'])
    lines = out.getvalue().splitlines()
    assert calls == [] and len(lines) == len(runs) - len(done)
    line = next(ln for ln in lines if osp.join('batch_size', '32', 'cars196') in ln)
    assert line.count('-m irtbox train') == 1 and line.count('--nproc 4') == 2
    assert '-m irtbox test' in line
    assert 'train_dataloader.batch_size=32' in line and 'randomness.seed=' in line
    assert '--out ' + osp.join(root, 'batch_size', '32', 'cars196') in line
    assert all('test_results.json' in ln and '.npz' not in ln and 'rm ' not in ln
               for ln in lines)
    shelf = next(ln for ln in lines if sweeps.OFF_THE_SHELF in ln)
    assert 'irtbox train' not in shelf and '-m irtbox test' in shelf and '--nproc' not in shelf
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        sweep.main([spec_path, '--work-root', root, '--emit', 'plain', '--keep-embeddings'])
    lines = out.getvalue().splitlines()
    assert len(lines) == len(runs) - len(done)
    assert all(ln.count('--out ') == 1 and 'test_results.npz' in ln for ln in lines)


@pytest.mark.slow
def test_keep_embeddings_then_force(fake_sweep):
    spec_path, root, runs, done, trained, calls = fake_sweep
    sweep.main([spec_path, '--work-root', root, '--no-plot', '--keep-embeddings'])
    tested = {d for tool, d, _ in calls if tool == 'test'}
    for run in runs:
        assert osp.isfile(osp.join(run.work_dir, 'test_results.json'))
        assert osp.isfile(osp.join(run.work_dir, 'test_results.npz')) == (run.work_dir in tested)
    calls.clear()
    sweep.main([spec_path, '--work-root', root, '--no-plot', '--force'])
    assert {d for tool, d, _ in calls if tool == 'test'} == {r.work_dir for r in runs}
    # The old embeddings went with the old results; the new test wrote metrics only.
    assert not any(osp.exists(osp.join(r.work_dir, 'test_results.npz')) for r in runs)
    assert all(osp.isfile(osp.join(r.work_dir, 'test_results.json')) for r in runs)


def test_subsets_of_the_grid(tmp_path):
    spec = sweeps.load_spec(write_spec(tmp_path))
    runs = sweeps.expand(spec, 'W')
    kept = sweeps.select_runs(runs, spec, factors=['model_lr'], datasets=['cub200'],
                             losses=['ArcFace'], seeds=[0, 2])
    trained = [r for r in kept if r.factor != sweeps.OFF_THE_SHELF]
    assert {(r.factor, r.dataset, r.loss) for r in trained} == {('model_lr', 'cub200', 'ArcFace')}
    assert sorted((r.value, r.seed) for r in trained) == [
        (1e-06, 0), (1e-06, 2), (0.0001, 0), (0.0001, 2)]
    assert [r.dataset for r in kept if r.factor == sweeps.OFF_THE_SHELF] == ['cub200']
    assert sweeps.select_runs(runs, spec) == runs
    dry = sweep.main([write_spec(tmp_path), '--work-root', 'W', '--dry-run', '--losses',
                      'MultiSimilarity', '--seeds', '1'])
    assert {(r.loss, r.seed) for r in dry if r.factor != sweeps.OFF_THE_SHELF} == {
        ('MultiSimilarity', 1)}


def test_bad_only_and_empty_collect(tmp_path):
    spec_path = write_spec(tmp_path)
    for option, value in (('--only', 'dim'), ('--datasets', 'sop'), ('--losses', 'CosFace'),
                          ('--seeds', '7')):
        with pytest.raises(SystemExit, match=f"{option}: .*{value}.* not in the spec"):
            sweep.main([spec_path, '--work-root', str(tmp_path / 'W'), option, value])
    with pytest.raises(SystemExit, match='no finished run'):
        sweep.main([spec_path, '--work-root', str(tmp_path / 'W'), '--collect-only'])


@pytest.mark.slow
@pytest.mark.parametrize('band', ['minmax', 'std'])
def test_figure_from_fake_table(fake_sweep, band):
    import matplotlib.image
    spec_path, root, *_ = fake_sweep
    sweep.main([spec_path, '--work-root', root, '--no-plot'])
    paths = plot_sweep.main([osp.join(root, 'summary.csv'), spec_path, '--band', band,
                             '--out-dir', osp.join(root, band)])
    assert sorted(osp.basename(p) for p in paths) == [
        'fig_batch_size_map@r.png'.replace('@', 'at'), 'fig_batch_size_precisionat1.png',
        'fig_model_lr_mapatr.png', 'fig_model_lr_precisionat1.png']
    for path in paths:
        with open(path, 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n'
        height, width = matplotlib.image.imread(path).shape[:2]
        assert width > height > 100   # two dataset panels side by side


@pytest.mark.slow
def test_figure_with_categorical_values(tmp_path):
    summary = [dict(factor='dim', value=v, dataset='cub', loss=loss, family=fam, metric='p',
                    n=1, mean=m, std=0.0, min=m, max=m)
               for v, m in (('raw', 0.5), (64, 0.4), (512, 0.6))
               for loss, fam in (('ArcFace', 'classification'), ('NTXent', 'contrastive'))]
    summary.append(dict(factor=sweeps.OFF_THE_SHELF, value=None, dataset='cub', loss='',
                        family='', metric='p', n=1, mean=0.3, std=0.0, min=0.3, max=0.3))
    path = sweeps.plot_factor(summary, 'dim', 'p', str(tmp_path / 'f.png'),
                                  values=['raw', 64, 512])
    assert osp.getsize(path) > 1000
    with pytest.raises(ValueError, match="factor 'lr'"):
        sweeps.plot_factor(summary, 'lr', 'p', str(tmp_path / 'g.png'))


def small_spec(**factors):
    return dict(config='c_{loss}_{dataset}.py', losses=['ArcFace', 'NTXent'], datasets=['cub'],
                seeds=[0, 1], factors=factors)


DIM = dict(values=[dict(value='raw', options=[]), 64,
                   dict(value=128, options=['model.neck.out_channels={value}',
                                            'model.neck.bias=1'])],
           options=['model.neck.out_channels={value}'])


def test_seed_options(tmp_path):
    spec = {**small_spec(m=dict(values=[4], options=['sampler.m={value}'])),
            'seed_options': ['randomness.seed={seed}', 'train_dataloader.sampler.seed={seed}']}
    runs = sweeps.expand(sweeps.load_spec(write_spec(tmp_path, spec)), 'W')
    assert [r.options for r in runs if r.loss == 'ArcFace'] == [
        ['sampler.m=4', 'randomness.seed=0', 'train_dataloader.sampler.seed=0'],
        ['sampler.m=4', 'randomness.seed=1', 'train_dataloader.sampler.seed=1']]


def test_per_value_options(tmp_path):
    spec = sweeps.load_spec(write_spec(tmp_path, small_spec(dim=DIM)))
    assert sweeps.factor_values(spec['factors']['dim']) == ['raw', 64, 128]
    runs = [r for r in sweeps.expand(spec, 'W') if r.loss == 'NTXent' and r.seed == 1]
    assert [r.value for r in runs] == ['raw', 64, 128]
    assert [r.options for r in runs] == [
        ['randomness.seed=1'],
        ['model.neck.out_channels=64', 'randomness.seed=1'],
        ['model.neck.out_channels=128', 'model.neck.bias=1', 'randomness.seed=1']]
    assert [r.work_dir for r in runs] == [osp.join('W', 'dim', v, 'cub', 'NTXent', 'seed1')
                                         for v in ('raw', '64', '128')]


@pytest.mark.parametrize('change,message', [
    (dict(seed_options=['randomness.seed=0']), r'`seed_options` must .*\{seed\}'),
    (dict(seed_options='randomness.seed={seed}'), '`seed_options` must be a list'),
    (dict(seed_option='randomness.seed={seed}'), '`seed_option` is now `seed_options`'),
    (dict(factors=dict(dim={**DIM, 'values': [dict(options=[])]})), r'factors.dim.values\[0\]'),
    (dict(factors=dict(dim={**DIM, 'values': [dict(value=1, option=[])]})),
     r'factors.dim.values\[0\]'),
    (dict(factors=dict(dim={**DIM, 'values': [dict(value=1, options='a=1')]})),
     r'factors.dim.values\[0\].options must be a list of strings'),
    (dict(factors=dict(dim={**DIM, 'values': [64, 'raw', 64]})),
     'factors.dim.values must be distinct'),
    (dict(factors=dict(dim={**DIM, 'figure': '7'})),
     r"factors.dim.figure \(the paper's figure number\) must be None or a positive integer"),
    (dict(factors=dict(dim={**DIM, 'figure': True})),
     r"factors.dim.figure \(the paper's figure number\) must be None or a positive integer"),
    (dict(factors=dict(dim={**DIM, 'label': 7})), 'factors.dim.label must be a string'),
    (dict(factors=dict(dim={**DIM, 'logx': True})), r"factors.dim: unknown key\(s\) \['logx'\]"),
])
def test_bad_extended_specs(tmp_path, change, message):
    path = write_spec(tmp_path, {**small_spec(dim=DIM), **change})
    with pytest.raises(ValueError, match=re.escape(path) + ': .*' + message):
        sweeps.load_spec(path)


@pytest.fixture
def saved_figures(monkeypatch):
    """What each saved figure shows: suptitle, first panel's x label and x tick labels."""
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib.figure import Figure
    saved, original = {}, Figure.savefig

    def spy(fig, path, *args, **kwargs):
        ax = fig.axes[0]
        # Figures are written to a temporary name beside theirs, then renamed.
        name = re.sub(r'^\.(.+)\.\w+\.tmp\.\w+$', r'\1', osp.basename(path))
        saved[name] = dict(
            title=fig.get_suptitle(), xlabel=ax.get_xlabel(),
            ticks=[t.get_text() for t in ax.get_xticklabels()])
        return original(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, 'savefig', spy)
    return saved


@pytest.mark.slow
def test_figure_number_label_and_plain_values(tmp_path, monkeypatch, saved_figures):
    spec = small_spec(dim={**DIM, 'figure': 7, 'label': 'feature dimension'},
                      m=dict(values=['a', 'b'], options=['sampler.m={value}']))
    spec['metrics'] = ['precision@1']
    spec_path, root = write_spec(tmp_path, spec), str(tmp_path / 'W')
    fake_subprocess(monkeypatch, tmp_path, sweeps.expand(sweeps.load_spec(spec_path), root))
    monkeypatch.chdir(tmp_path)
    sweep.main([spec_path, '--work-root', root])
    assert sorted(saved_figures) == ['fig7_dim_precisionat1.png', 'fig_m_precisionat1.png']
    assert all(osp.isfile(osp.join(root, name)) for name in saved_figures)
    assert saved_figures['fig7_dim_precisionat1.png'] == dict(
        title='Fig. 7: dim', xlabel='feature dimension', ticks=['raw', '64', '128'])
    assert saved_figures['fig_m_precisionat1.png'] == dict(title='', xlabel='m', ticks=['a', 'b'])


def test_families_come_from_the_configs(tmp_path, monkeypatch):
    """A loss spelled as no class is named gets its family from the loss its config trains."""
    monkeypatch.chdir(tmp_path)
    for loss, name in (('cf', 'CosFaceLoss'), ('tcm', 'ThresholdConsistentMarginLoss')):
        (tmp_path / f'c_{loss}_d.py').write_text(
            f"model = dict(head=dict(losses=dict(metric=dict(type='PMLLoss', name='{name}'))))\n")
    assert sweeps.loss_families('c_{loss}_{dataset}.py', ['cf', 'tcm', 'ArcFace'], ['d']) == {
        'cf': 'classification', 'tcm': 'contrastive', 'ArcFace': 'classification'}
    # The spec's own `families` win over the config.
    assert sweeps.loss_families('c_{loss}_{dataset}.py', ['cf'], ['d'],
                                {'cf': 'contrastive'}) == {'cf': 'contrastive'}
    with pytest.raises(ValueError, match="'nope' has no family"):
        sweeps.loss_families('c_{loss}_{dataset}.py', ['nope'], ['d'])
