"""tools/sweep.py on fake runs: expansion, resume (finished runs skipped), tables, figures."""
import csv
import json
import os.path as osp
import statistics

import pytest

from tools import sweep
from tools.analysis_tools import plot_sweep

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
    runs = sweep.expand(sweep.load_spec(write_spec(tmp_path)), 'W')
    trained = [r for r in runs if r.factor != sweep.OFF_THE_SHELF]
    assert len(trained) == 2 * (2 * 2 * 2 * 3)
    assert len(runs) - len(trained) == 2
    assert len({r.work_dir for r in runs}) == len(runs)
    run = next(r for r in runs if r.factor == 'model_lr' and r.value == 1e-06
               and r.dataset == 'cub200' and r.loss == 'ArcFace' and r.seed == 2)
    assert run.config == 'configs/dml_benchmark/ArcFace_cub200.py'
    assert run.options == ['train_cfg.max_iters=20', 'optim_wrapper.optimizer.lr=1e-06',
                           'randomness.seed=2']
    assert run.work_dir == osp.join('W', 'model_lr', '1e-06', 'cub200', 'ArcFace', 'seed2')
    shelf = [r for r in runs if r.factor == sweep.OFF_THE_SHELF]
    assert [r.config for r in shelf] == ['configs/dml_benchmark/off_the_shelf_cars196.py',
                                        'configs/dml_benchmark/off_the_shelf_cub200.py']
    assert sweep.family_of('ArcFace') == 'classification'
    assert sweep.family_of('multi_similarity') == 'contrastive'


@pytest.mark.parametrize('change,message', [
    (dict(factors=None), 'factors'),
    (dict(losses=['MyLoss']), "'MyLoss' has no family"),
    (dict(factors=dict(m=dict(values=[1], options=['sampler.m=4']))), "'{value}'"),
    (dict(factors=dict(m=dict(values=[], options=['x={value}']))), 'factors.m'),
])
def test_bad_specs(tmp_path, change, message):
    spec = {**SPEC, **change}
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(SystemExit, match=message):
        sweep.load_spec(write_spec(tmp_path, spec))


def test_spec_families_and_python_spec(tmp_path):
    path = tmp_path / 'grid.py'
    path.write_text("config = 'c_{loss}_{dataset}.py'\nlosses = ['MyLoss']\ndatasets = ['d']\n"
                    "families = dict(MyLoss='contrastive')\n"
                    "factors = dict(m=dict(values=[1, 2], options=['sampler.m={value}']))\n")
    runs = sweep.expand(sweep.load_spec(str(path)), 'W')
    assert [r.options for r in runs] == [['sampler.m=1', 'randomness.seed=0'],
                                         ['sampler.m=2', 'randomness.seed=0']]


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch):
    """A spec with some runs finished, some trained only; subprocess calls are recorded."""
    spec_path = write_spec(tmp_path)
    root = str(tmp_path / 'W')
    runs = sweep.expand(sweep.load_spec(spec_path), root)
    by_dir = {r.work_dir: r for r in runs}
    done, trained = runs[::5], runs[1::7]
    for run in done:
        (tmp_path / run.work_dir).mkdir(parents=True, exist_ok=True)
        (tmp_path / run.work_dir / sweep.RESULTS).write_text(json.dumps(fake_metrics(run)))
    done_dirs = {r.work_dir for r in done}
    trained = [r for r in trained if r.work_dir not in done_dirs]
    for run in trained:
        (tmp_path / run.work_dir).mkdir(parents=True, exist_ok=True)
        (tmp_path / run.work_dir / sweep.TRAIN_DONE).write_text('')
        if run.factor != sweep.OFF_THE_SHELF:
            (tmp_path / run.work_dir / 'best.pth').write_text('')
    calls = []

    def fake_run(cmd, check, env):
        tool, config = osp.basename(cmd[1]), cmd[2]
        work_dir = cmd[cmd.index('--work-dir') + 1]
        if tool == 'test.py':
            work_dir = osp.dirname(work_dir)
            (tmp_path / work_dir / sweep.RESULTS).write_text(
                json.dumps(fake_metrics(by_dir[work_dir])))
            (tmp_path / work_dir / 'test_results.npz').write_text('x')
        else:
            (tmp_path / work_dir / 'last_checkpoint').write_text(osp.join(work_dir, 'iter_20.pth'))
        calls.append((tool, work_dir, cmd))

    monkeypatch.setattr(sweep.subprocess, 'run', fake_run)
    monkeypatch.chdir(tmp_path)
    return spec_path, root, runs, done, trained, calls


def test_resume_skips_finished_runs(fake_sweep):
    spec_path, root, runs, done, trained, calls = fake_sweep
    sweep.main([spec_path, '--work-root', root, '--no-plot'])
    trains = {d for tool, d, _ in calls if tool == 'train.py'}
    tests = {d: cmd for tool, d, cmd in calls if tool == 'test.py'}
    finished = {r.work_dir for r in done}
    skip_train = finished | {r.work_dir for r in trained}
    assert trains == {r.work_dir for r in runs if r.work_dir not in skip_train
                      and r.factor != sweep.OFF_THE_SHELF}
    assert set(tests) == {r.work_dir for r in runs if r.work_dir not in finished}
    for run in trained:   # tested on the early-stopping checkpoint, trained no more
        if run.factor != sweep.OFF_THE_SHELF:
            assert osp.join(run.work_dir, 'best.pth') in tests[run.work_dir]
    todo = next(r for r in runs if r.work_dir in trains)
    assert osp.join(todo.work_dir, 'iter_20.pth') in tests[todo.work_dir]
    assert not any(osp.exists(osp.join(r.work_dir, 'test_results.npz')) for r in runs)
    calls.clear()
    sweep.main([spec_path, '--work-root', root, '--no-plot'])   # all finished now
    assert calls == []


def test_tables(fake_sweep):
    spec_path, root, runs, *_ = fake_sweep
    sweep.main([spec_path, '--work-root', root, '--no-plot'])
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
    assert float(row['mean']) == pytest.approx(statistics.mean(vals))
    assert float(row['std']) == pytest.approx(statistics.pstdev(vals))
    assert (float(row['min']), float(row['max'])) == pytest.approx((min(vals), max(vals)))


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
    assert line.count('tools/dist_train.sh') == 1 and 'tools/dist_test.sh' in line
    assert 'train_dataloader.batch_size=32' in line and 'randomness.seed=' in line
    shelf = next(ln for ln in lines if sweep.OFF_THE_SHELF in ln)
    assert 'train.py' not in shelf and 'tools/test.py' in shelf


def test_bad_only_and_empty_collect(tmp_path):
    spec_path = write_spec(tmp_path)
    with pytest.raises(SystemExit, match='unknown factor'):
        sweep.main([spec_path, '--work-root', str(tmp_path / 'W'), '--only', 'dim'])
    with pytest.raises(SystemExit, match='no finished run'):
        sweep.main([spec_path, '--work-root', str(tmp_path / 'W'), '--collect-only'])


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


def test_figure_with_categorical_values(tmp_path):
    summary = [dict(factor='dim', value=v, dataset='cub', loss=loss, family=fam, metric='p',
                    n=1, mean=m, std=0.0, min=m, max=m)
               for v, m in (('raw', 0.5), (64, 0.4), (512, 0.6))
               for loss, fam in (('ArcFace', 'classification'), ('NTXent', 'contrastive'))]
    summary.append(dict(factor=sweep.OFF_THE_SHELF, value=None, dataset='cub', loss='',
                        family='', metric='p', n=1, mean=0.3, std=0.0, min=0.3, max=0.3))
    path = plot_sweep.plot_factor(summary, 'dim', 'p', str(tmp_path / 'f.png'),
                                  values=['raw', 64, 512])
    assert osp.getsize(path) > 1000
    with pytest.raises(ValueError, match="factor 'lr'"):
        plot_sweep.plot_factor(summary, 'lr', 'p', str(tmp_path / 'g.png'))
