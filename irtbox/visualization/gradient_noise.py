"""IRT Fig. 4 from training runs: gradient noise γ against the margin β, one line per KoLeo
weight λ.

Each run is a work dir of a training with the GradientNoiseHook: :func:`read_run` takes γ
(``gamma_mean`` of ``<work_dir>/gradient_noise.json``), β (the margin of the loss the hook
measured, from the config MMEngine dumped in the work dir) and λ (the weight of the head's
``KoLeoLoss``, 0 without one); :func:`plot_gradient_noise` draws the rows and writes them as
a CSV beside the PNG.
"""
import csv
import glob
import json
import os.path as osp
from typing import List, Optional, Tuple

from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write

from .plotting import pyplot, save_figure

__all__ = ['RESULT_FILE', 'AXES', 'CSV_FIELDS', 'dumped_config', 'read_run', 'check_unique',
           'plot_gradient_noise']

RESULT_FILE = 'gradient_noise.json'
AXES = {'beta': r'margin $\beta$', 'lambda': r'KoLeo weight $\lambda$'}
SYMBOLS = {'beta': r'$\beta$', 'lambda': r'$\lambda$'}
CSV_FIELDS = ('beta', 'lambda', 'gamma_mean', 'num_iterations', 'interval', 'loss', 'work_dir')


def dumped_config(work_dir: str) -> str:
    """The config MMEngine dumped at the top of ``work_dir`` (its only ``*.py`` file)."""
    found = sorted(glob.glob(osp.join(work_dir, '*.py')))
    if len(found) != 1:
        raise ValueError(f'{work_dir}: expected exactly one dumped config (*.py) at the top of '
                         f'the work dir to read β and λ from, found {len(found)}: {found}')
    return found[0]


def read_run(work_dir: str) -> dict:
    """γ, β, λ and the hook's settings of one work dir (a row of the CSV)."""
    from mmengine.config import Config

    path = osp.join(work_dir, RESULT_FILE)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} not found: train this run with '
                                "custom_hooks=[dict(type='GradientNoiseHook')] (the table5 "
                                'configs have it) and let it finish')
    with open(path) as f:
        result = json.load(f)
    missing = [k for k in ('loss', 'gamma_mean', 'num_iterations', 'interval') if k not in result]
    if missing:
        raise ValueError(f'{path}: missing key(s) {missing}; expected the output of '
                         'GradientNoiseHook')
    if result['gamma_mean'] is None:
        raise ValueError(f'{path}: gamma_mean is null, γ was never defined in this run (fewer '
                         'than 2 samples with a non-zero gradient in every measured iteration)')
    cfg_path = dumped_config(work_dir)
    head = Config.fromfile(cfg_path).get('model', {}).get('head') or {}
    losses = head.get('losses') or {}
    loss = result['loss']
    if 'margin' not in (losses.get(loss) or {}):
        raise KeyError(f'{cfg_path}: model.head.losses.{loss}.margin not found (β of the loss '
                       f"measured in {path}); the head's losses are {sorted(losses)}")
    koleo = [name for name, c in losses.items()
             if str(c.get('type', '')).split('.')[-1] == 'KoLeoLoss']
    if len(koleo) > 1:
        raise ValueError(f'{cfg_path}: several KoLeoLoss terms {koleo} in model.head.losses; '
                         'λ is ambiguous')
    weights = head.get('loss_weights') or {}
    lam = float(weights.get(koleo[0], 1.0)) if koleo else 0.0
    return dict(beta=float(losses[loss]['margin']), **{'lambda': lam},
                gamma_mean=float(result['gamma_mean']), num_iterations=result['num_iterations'],
                interval=result['interval'], loss=loss, work_dir=work_dir)


def check_unique(rows: List[dict]) -> None:
    """Raise when two runs share (β, λ): the figure has one point per pair."""
    seen = {}
    for row in rows:
        key = (row['beta'], row['lambda'])
        if key in seen:
            raise ValueError(f'runs {seen[key]} and {row["work_dir"]} both have β={key[0]}, '
                             f'λ={key[1]}; give one run per (β, λ), e.g. one backbone per figure')
        seen[key] = row['work_dir']


def plot_gradient_noise(rows: List[dict], out_path: str, x: str = 'beta', series: str = 'lambda',
                        title: Optional[str] = None) -> Tuple[str, str]:
    """Draw γ against ``x``, one line per value of ``series``; write the PNG and the CSV.

    Returns (png path, csv path); the CSV is ``out_path`` with the ``.csv`` extension.
    """
    plt = pyplot()
    if x not in AXES or series not in AXES or x == series:
        raise ArgumentError(f'x and series must be {sorted(AXES)}, one each; got x={x!r}, '
                            f'series={series!r}', 'x')
    if not rows:
        raise ValueError('no runs to plot')
    check_unique(rows)
    rows = sorted(rows, key=lambda r: (r[series], r[x]))
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    colours = plt.get_cmap('viridis')
    levels = sorted({r[series] for r in rows})
    for i, level in enumerate(levels):
        line = [r for r in rows if r[series] == level]
        ax.plot([r[x] for r in line], [r['gamma_mean'] for r in line], marker='o',
                color=colours(i / max(1, len(levels) - 1)),
                label=f'{SYMBOLS[series]} = {level:g}')
    ax.set(xlabel=AXES[x], title=title or '',
           ylabel=r'$\gamma = \|\mathrm{Cov}(\nabla_z \mathcal{L}_\mathrm{contr})\|_*$')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, out_path)
    csv_path = osp.splitext(out_path)[0] + '.csv'

    def write(tmp: str) -> None:
        with open(tmp, 'w', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            writer.writeheader()
            writer.writerows({k: row[k] for k in CSV_FIELDS} for row in rows)
    atomic_write(csv_path, write)
    return out_path, csv_path
