"""The tables of a sweep: runs.csv / runs.json (one row per finished run) and summary.csv
(mean, std, min, max over seeds), and reading summary.csv back."""
import csv
import itertools
import json
import os.path as osp
import statistics
from typing import Dict, List, Optional, Sequence

from irtbox.utils.fileio import atomic_write, atomic_write_text, read_json

from .spec import OFF_THE_SHELF, Run, factor_values, value_dir
from .state import RESULTS

__all__ = ['collect', 'metric_names', 'summarize', 'write_table', 'read_summary',
           'format_tables', 'SUMMARY_DECIMALS']

#: Decimals summary.csv keeps of its statistics (metrics are in percent: 89.49).
SUMMARY_DECIMALS = 2
_STATISTICS = ('mean', 'std', 'min', 'max')


def collect(runs: List[Run], families: Dict[str, str]) -> List[dict]:
    """One row per finished run: the run's coordinates, its loss's family (``families``:
    loss -> family, as :func:`~irtbox.ops.sweeps.spec.load_spec` completes it) and its test
    metrics. A results file that is not a JSON object raises ``ValueError``."""
    rows = []
    for run in runs:
        path = osp.join(run.work_dir, RESULTS)
        if not osp.isfile(path):
            continue
        try:
            metrics = read_json(path)
        except json.JSONDecodeError as e:
            raise ValueError(f'{path}: not valid JSON ({e}); delete it to re-test the run')
        if not isinstance(metrics, dict):
            raise ValueError(f'{path}: expected a JSON object metric name -> value')
        rows.append(dict(
            factor=run.factor, value=run.value, dataset=run.dataset, loss=run.loss,
            family='' if run.factor == OFF_THE_SHELF else families[run.loss],
            seed=run.seed, work_dir=run.work_dir,
            **{k: float(v) for k, v in metrics.items()}))
    return rows


def metric_names(rows: List[dict]) -> List[str]:
    fixed = {'factor', 'value', 'dataset', 'loss', 'family', 'seed', 'work_dir'}
    return sorted({k for r in rows for k in r if k not in fixed})


def summarize(rows: List[dict]) -> List[dict]:
    """Mean, population std, min and max over seeds per (factor, value, dataset, loss, metric)."""
    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        groups.setdefault((r['factor'], value_dir(r['value']), r['dataset'], r['loss']),
                          []).append(r)
    out = []
    for group in groups.values():
        first = group[0]
        for metric in metric_names(group):
            vals = [r[metric] for r in group if metric in r]
            out.append(dict(factor=first['factor'], value=first['value'],
                            dataset=first['dataset'], loss=first['loss'],
                            family=first['family'], metric=metric, n=len(vals),
                            mean=statistics.fmean(vals), std=statistics.pstdev(vals),
                            min=min(vals), max=max(vals)))
    return out


def write_table(rows: List[dict], path: str, decimals: Optional[int] = None) -> None:
    """CSV (``path``.csv) or JSON (``path``.json) with one line per row; ``decimals``: the
    statistics (mean, std, min, max) rounded to that many (summary.csv:
    :data:`SUMMARY_DECIMALS`)."""
    if decimals is not None:
        rows = [{k: round(v, decimals) if k in _STATISTICS else v for k, v in r.items()}
                for r in rows]
    if path.endswith('.json'):
        atomic_write_text(path, json.dumps(rows, indent=1))
        return
    fields = list(dict.fromkeys(k for r in rows for k in r))

    def write(tmp: str) -> None:
        with open(tmp, 'w', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    atomic_write(path, write)


def read_summary(path: str) -> List[dict]:
    """summary.csv back into rows (numbers parsed; factor values as numbers when they are)."""
    def number(text):
        for cast in (int, float):
            try:
                return cast(text)
            except (TypeError, ValueError):
                pass
        return text
    with open(path, newline='') as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for key in ('value', 'mean', 'std', 'min', 'max', 'n'):
            r[key] = number(r.get(key))
    return rows


def format_tables(summary: List[dict], spec: dict,
                  metrics: Optional[Sequence[str]] = None) -> str:
    """The summary as text, one table per factor, dataset and metric: a row per loss (and the
    off-the-shelf model's, when the sweep has one), a column per value of the factor, each
    cell the mean over seeds in percent with one decimal (what docs/sweeps.md shows).
    ``metrics``: those shown (default: the spec's ``metrics``, else all)."""
    metrics = list(metrics or spec.get('metrics') or sorted({r['metric'] for r in summary}))
    shelf = {(r['dataset'], r['metric']): r['mean'] for r in summary
             if r['factor'] == OFF_THE_SHELF}
    blocks = []
    for (factor, fspec), dataset, metric in itertools.product(
            spec['factors'].items(), spec['datasets'], metrics):
        cells = {(r['loss'], value_dir(r['value'])): r for r in summary
                 if (r['factor'], r['dataset'], r['metric']) == (factor, dataset, metric)}
        if not cells:
            continue
        values = [v for v in factor_values(fspec)
                  if any(key[1] == value_dir(v) for key in cells)]
        losses = [loss for loss in spec['losses'] if any(key[0] == loss for key in cells)]
        label = fspec.get('label', factor)
        rows = [[label] + [f'{v:g}' if isinstance(v, float) else str(v) for v in values]]
        for loss in losses:
            rows.append([loss] + [f'{cells[(loss, value_dir(v))]["mean"]:.1f}'
                                  if (loss, value_dir(v)) in cells else '-' for v in values])
        if (dataset, metric) in shelf:
            rows.append(['off-the-shelf', f'{shelf[(dataset, metric)]:.1f}'])
        width = [max(len(r[i]) for r in rows if i < len(r)) for i in range(len(rows[0]))]
        lines = ['  '.join(c.ljust(width[0]) if i == 0 else c.rjust(width[i])
                           for i, c in enumerate(r)).rstrip() for r in rows]
        over = '/'.join(map(str, sorted({r['n'] for r in cells.values()})))
        blocks.append(f'{metric} (%) against {label} on {dataset}, mean over {over} seed(s):\n'
                      + '\n'.join(lines))
    return '\n\n'.join(blocks)
