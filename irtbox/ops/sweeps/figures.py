"""The figures of a sweep (Berton, Musgrave & Masone, Figures 4-10) from its summary table.

One PNG per (factor, metric), one panel per dataset: the metric against the
factor's values, one line per loss (solid: contrastive family, dotted:
classification family) at the mean over seeds, a shaded band (min-max over
seeds, or mean +- std), and the off-the-shelf model as a grey horizontal line.
Numeric factor values get a numeric axis (logarithmic with the factor's
``log_x``, or when all values are positive and span >= 100x); other values
(e.g. 'raw' next to dimensions) are placed evenly in the spec's order.
The file is fig_<factor>_<metric>.png, or fig<N>_<factor>_<metric>.png titled
'Fig. N: <factor>' when the factor has `figure=N`; the x axis is labelled with
the factor's `label` (default: its name).
"""
import os.path as osp
from typing import List, Optional

from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write
from irtbox.visualization.plotting import pyplot

from .spec import OFF_THE_SHELF, factor_values

__all__ = ['plot_factor', 'plot_all']


def _numeric(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _same(a, b) -> bool:
    return a == b or str(a) == str(b)


def plot_factor(summary: List[dict], factor: str, metric: str, out_path: str,
                values: Optional[list] = None, log_x: Optional[bool] = None,
                band: str = 'minmax', xlabel: Optional[str] = None,
                title: Optional[str] = None) -> str:
    """Draws one figure; ``summary`` rows as from :func:`~irtbox.ops.sweeps.tables.summarize`.
    ``xlabel`` defaults to ``factor``; ``title``, when given, is the figure's suptitle."""
    plt = pyplot()
    if band not in ('minmax', 'std'):
        raise ArgumentError(f"band must be 'minmax' or 'std', got {band!r}", 'band')
    rows = [r for r in summary if r['factor'] == factor and r['metric'] == metric]
    if not rows:
        raise ValueError(f'no summary rows for factor {factor!r} and metric {metric!r}')
    shelf = {r['dataset']: r['mean'] for r in summary
             if r['factor'] == OFF_THE_SHELF and r['metric'] == metric}
    datasets = list(dict.fromkeys(r['dataset'] for r in rows))
    if values is None:
        values = list(dict.fromkeys(r['value'] for r in rows))
    numeric = _numeric(values)
    if numeric:
        positions = [float(v) for v in values]
        if log_x is None:
            log_x = min(positions) > 0 and max(positions) >= 100 * min(positions)
    else:
        positions, log_x = list(range(len(values))), False
    # One colour per loss, the same in every panel: tab20's strong colours, then its light ones.
    palette = plt.get_cmap('tab20')
    shades = list(range(0, 20, 2)) + list(range(1, 20, 2))
    colours = {loss: palette(shades[i % 20])
               for i, loss in enumerate(dict.fromkeys(r['loss'] for r in rows))}
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        for loss in dict.fromkeys(r['loss'] for r in rows if r['dataset'] == dataset):
            found = [(x, next((r for r in rows if r['dataset'] == dataset and r['loss'] == loss
                               and _same(r['value'], v)), None)) for x, v in zip(positions, values)]
            points = [(x, r) for x, r in found if r is not None]
            xs = [x for x, _ in points]
            mean = [float(r['mean']) for _, r in points]
            if band == 'minmax':
                lo, hi = [float(r['min']) for _, r in points], [float(r['max']) for _, r in points]
            else:
                lo = [float(r['mean']) - float(r['std']) for _, r in points]
                hi = [float(r['mean']) + float(r['std']) for _, r in points]
            style = '-' if points[0][1]['family'] == 'contrastive' else ':'
            ax.plot(xs, mean, style, marker='o', markersize=3, label=loss, color=colours[loss])
            ax.fill_between(xs, lo, hi, color=colours[loss], alpha=0.15, linewidth=0)
        if dataset in shelf:
            ax.axhline(float(shelf[dataset]), color='grey', linestyle='--', label='off-the-shelf')
        if log_x:
            ax.set_xscale('log')
        if not numeric:
            ax.set_xticks(positions)
            ax.set_xticklabels([str(v) for v in values])
        ax.set_title(dataset)
        ax.set_xlabel(xlabel or factor)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    # One legend for all panels, outside them (12 losses would cover a panel's lines).
    legend = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), fontsize=7, loc='center left',
               bbox_to_anchor=(1.0, 0.5))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.94) if title else None)  # the top strip: the suptitle
    atomic_write(out_path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches='tight'))
    plt.close(fig)
    return out_path


def plot_all(summary: List[dict], spec: dict, out_dir: str, band: str = 'minmax') -> List[str]:
    """Every (factor, metric) figure of a sweep: ``out_dir``/fig[N]_<factor>_<metric>.png."""
    metrics = spec.get('metrics') or sorted({r['metric'] for r in summary})
    paths = []
    for factor, fspec in spec['factors'].items():
        number = fspec.get('figure')
        for metric in metrics:
            if not any(r['factor'] == factor and r['metric'] == metric for r in summary):
                continue
            name = (f'fig{"" if number is None else number}_{factor}_{metric}.png'
                    .replace('@', 'at').replace('/', '_'))
            paths.append(plot_factor(
                summary, factor, metric, osp.join(out_dir, name),
                values=factor_values(fspec), log_x=fspec.get('log_x'), band=band,
                xlabel=fspec.get('label'),
                title=None if number is None else f'Fig. {number}: {factor}'))
    return paths
