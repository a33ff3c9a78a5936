"""tools/analysis_tools/plot_gradient_noise.py and irtbox.visualization.gradient_noise on fake work
dirs (Fig. 4: γ against β, per λ)."""
import csv
import json
import os.path as osp

import matplotlib.image
import pytest

from irtbox.utils.config import load_config
from irtbox.cli import plot_gradient_noise as tool
from irtbox.visualization.gradient_noise import read_run

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TABLE5 = osp.join(ROOT, 'configs', 'irt', 'table5', 'irt_deit-s_beta{}-lambda{}_1xb64-35k_sop.py')


def fake_run(root, name, gamma, margin=0.5, koleo=None, koleo_name='koleo', result=None):
    """A work dir as a GradientNoiseHook run leaves it: the dumped config and the json."""
    work_dir = root / name
    work_dir.mkdir()
    losses = {'contrastive': dict(type='ContrastiveLoss', margin=margin)}
    head = dict(type='EmbeddingHead', losses=losses)
    if koleo is not None:
        losses[koleo_name] = dict(type='KoLeoLoss')
        if koleo != 'default':
            head['loss_weights'] = {koleo_name: koleo}
    (work_dir / f'{name}.py').write_text(f'model = dict(type="ImageRetriever", head={head!r})\n')
    if result is None:
        result = dict(loss='contrastive', gamma_mean=gamma, num_iterations=10, num_undefined=0,
                      interval=1)
    (work_dir / 'gradient_noise.json').write_text(json.dumps(result))
    return str(work_dir)


def test_beta_lambda_from_the_dumped_config(tmp_path):
    rows = [read_run(fake_run(tmp_path, 'a', 0.4, margin=0.3)),
            read_run(fake_run(tmp_path, 'b', 0.2, margin=0.7, koleo=0.5)),
            read_run(fake_run(tmp_path, 'c', 0.3, margin=0.1, koleo='default',
                                   koleo_name='entropy'))]
    assert [(r['beta'], r['lambda'], r['gamma_mean']) for r in rows] == [
        (0.3, 0.0, 0.4), (0.7, 0.5, 0.2), (0.1, 1.0, 0.3)]  # no KoLeo: 0; unlisted weight: 1


@pytest.mark.slow
def test_real_table5_configs(tmp_path):
    """β and λ of configs MMEngine dumped from the shipped β x λ grid."""
    for beta, lam in (('0.3', '0.0'), ('0.9', '0.7')):
        work_dir = tmp_path / f'{beta}-{lam}'
        work_dir.mkdir()
        load_config(TABLE5.format(beta, lam)).dump(str(work_dir / 'cfg.py'))
        (work_dir / 'gradient_noise.json').write_text(json.dumps(dict(
            loss='contrastive', gamma_mean=0.5, num_iterations=3, num_undefined=0, interval=1)))
        row = read_run(str(work_dir))
        assert (row['beta'], row['lambda']) == (float(beta), float(lam))


@pytest.mark.slow
@pytest.mark.parametrize('x,series', [('beta', 'lambda'), ('lambda', 'beta')])
def test_main_writes_png_and_csv(tmp_path, x, series):
    grid = {(b, lam): round(0.1 + b + lam / 10, 6) for b in (0.1, 0.5, 0.9) for lam in (0.0, 0.7)}
    dirs = [fake_run(tmp_path, f'b{b}-l{lam}', g, margin=b, koleo=lam or None)
            for (b, lam), g in grid.items()]
    out = str(tmp_path / 'figs' / 'fig4.png')
    png, csv_path = tool.main(dirs + ['--out', out, '--x', x, '--series', series,
                                      '--title', 'DeiT-S'])
    assert png == out and csv_path == str(tmp_path / 'figs' / 'fig4.csv')
    assert matplotlib.image.imread(png).ndim == 3
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(grid)
    assert {(float(r['beta']), float(r['lambda'])): float(r['gamma_mean']) for r in rows} == grid
    # Sorted by line (series), then along the x axis.
    keys = [(float(r[series]), float(r[x])) for r in rows]
    assert keys == sorted(keys)
    assert all(r['loss'] == 'contrastive' and r['interval'] == '1' for r in rows)


def test_help(capsys):
    with pytest.raises(SystemExit):
        tool.parse_args(['--help'])
    text = capsys.readouterr().out
    assert 'gradient_noise.json' in text and '--series' in text and 'Fig. 4' in text


def test_same_axis_twice_is_refused(tmp_path):
    with pytest.raises(SystemExit, match='--x and --series must differ'):
        tool.main([fake_run(tmp_path, 'a', 0.1), '--out', str(tmp_path / 'f.png'),
                   '--x', 'beta', '--series', 'beta'])


def test_duplicate_beta_lambda_is_refused(tmp_path):
    dirs = [fake_run(tmp_path, 'deit', 0.1), fake_run(tmp_path, 'r50', 0.2)]
    with pytest.raises(ValueError, match=r'deit and .*r50 both have β=0.5, λ=0.0'):
        tool.main(dirs + ['--out', str(tmp_path / 'f.png')])


def test_missing_json(tmp_path):
    work_dir = tmp_path / 'w'
    work_dir.mkdir()
    with pytest.raises(FileNotFoundError, match=r'w/gradient_noise.json not found.*GradientNoise'):
        read_run(str(work_dir))


def test_undefined_gamma(tmp_path):
    work_dir = fake_run(tmp_path, 'w', None)
    with pytest.raises(ValueError, match='gamma_mean is null'):
        read_run(work_dir)


def test_incomplete_json(tmp_path):
    work_dir = fake_run(tmp_path, 'w', 0.1, result=dict(gamma_mean=0.1))
    with pytest.raises(ValueError, match=r"missing key\(s\) \['loss', 'num_iterations'"):
        read_run(work_dir)


def test_config_without_margin(tmp_path):
    work_dir = fake_run(tmp_path, 'w', 0.1)
    (tmp_path / 'w' / 'w.py').write_text('model = dict(head=dict(losses=dict(snca=dict())))\n')
    with pytest.raises(KeyError, match=r"w.py: model.head.losses.contrastive.margin not found.*"
                                       r"\['snca'\]"):
        read_run(work_dir)


@pytest.mark.parametrize('configs', [[], ['a.py', 'b.py']])
def test_dumped_config_must_be_unique(tmp_path, configs):
    work_dir = fake_run(tmp_path, 'w', 0.1)
    (tmp_path / 'w' / 'w.py').unlink()
    for name in configs:
        (tmp_path / 'w' / name).write_text('model = dict()\n')
    with pytest.raises(ValueError, match=f'exactly one dumped config.*found {len(configs)}'):
        read_run(work_dir)
