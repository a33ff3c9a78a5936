"""Grid specs of a sweep (the training-recipe benchmark's): reading, checking, expanding into runs.

A grid spec is a Python, YAML or JSON file with these keys:

  config      base config path, with {loss} and {dataset} placeholders,
              e.g. 'configs/dml_benchmark/dml_dinov2-vit-b_{loss}_1xb256-39k_{dataset}.py'
  losses      list of loss names (their family, for the line style, comes from
              the loss the config names, see irtbox/ops/sweeps/families.py, or the
              spec's optional `families` dict: name -> 'contrastive' | 'classification')
  datasets    list of dataset names
  seeds       list of seeds (default [0])
  seed_options  optional list of option templates, each with '{seed}', that every
              run gets for its seed (default ['randomness.seed={seed}'])
  factors     dict: factor name -> dict with the keys
                values   non-empty list; each entry a plain value V, or
                         dict(value=V, options=[...]) whose option templates
                         replace the factor's `options` for V alone (e.g. feature
                         dimension 'raw', the CLS token without a projection:
                         dict(value='raw', options=[])); in both, {value} is V
                options  list of option templates, each with '{value}',
                         e.g. ['train_dataloader.batch_size={value}']
                log_x    optional bool: logarithmic x axis (default: when the
                         values are positive and span >= 100x)
                figure   optional int, the paper's figure number: the figures are
                         then fig<N>_<factor>_<metric>.png, titled 'Fig. N: <factor>'
                label    optional x-axis label (default: the factor name)
                losses   optional subset of `losses` run for this factor (e.g. the
                         classifier learning rate, Fig. 10: classification only)
              Each factor is swept on its own (the others stay at the base
              config), as in the paper's Figures 4-10. A run's value (its work
              dir, the tables, the figures' x axis) is V.
  options     optional list of 'key=value' given to every run (e.g. a shorter schedule)
  off_the_shelf  optional config path (with {dataset}) tested without training:
              the horizontal line of each figure
  metrics     optional list of metric names to plot (default: all collected)
"""
import itertools
import os.path as osp
import re
from typing import List, NamedTuple, Optional

from irtbox.utils.checks import check_int
from irtbox.utils.errors import IrtboxError
from irtbox.utils.fileio import read_json
from .families import loss_families

__all__ = ['Run', 'SelectionError', 'OFF_THE_SHELF', 'load_spec', 'expand', 'select_runs',
           'factor_values', 'value_entries', 'value_dir']

OFF_THE_SHELF = 'off_the_shelf'
REQUIRED = ('config', 'losses', 'datasets', 'factors')
FACTOR_KEYS = ('values', 'options', 'log_x', 'figure', 'label', 'losses')
DEFAULT_SEED_OPTIONS = ['randomness.seed={seed}']


class SelectionError(IrtboxError, ValueError):
    """A subset of runs names a ``key`` value ('factors', 'datasets', 'losses', 'seeds')
    that the spec does not have."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


class Run(NamedTuple):
    """One training (or, for factor 'off_the_shelf', one test of the untrained model)."""
    factor: str
    value: object
    dataset: str
    loss: str
    seed: Optional[int]
    config: str
    options: List[str]
    work_dir: str


def value_dir(value) -> str:
    """A file-name-safe spelling of a factor value (1e-06, 0.25, 256, raw)."""
    text = repr(value) if isinstance(value, float) else str(value)
    return re.sub(r'[^A-Za-z0-9_.+-]', '_', text)


def value_entries(fspec: dict) -> List[tuple]:
    """(V, option templates) per value of a factor, in spec order."""
    return [(v['value'], v.get('options', fspec['options'])) if isinstance(v, dict)
            else (v, fspec['options']) for v in fspec['values']]


def factor_values(fspec: dict) -> list:
    """The plain values V of a factor (``dict(value=V, options=...)`` unwrapped), in spec order."""
    return [value for value, _ in value_entries(fspec)]


def _is_str_list(x) -> bool:
    return isinstance(x, (list, tuple)) and all(isinstance(o, str) for o in x)


def _check_factor(path: str, name: str, factor) -> None:
    where = f'{path}: factors.{name}'
    if not isinstance(factor, dict) or not factor.get('values') or 'options' not in factor:
        raise ValueError(f'{where} must be dict(values=[...non-empty], '
                         "options=['key={value}', ...])")
    unknown = sorted(set(factor) - set(FACTOR_KEYS))
    if unknown:
        raise ValueError(f'{where}: unknown key(s) {unknown}; expected some of {list(FACTOR_KEYS)}')
    if not _is_str_list(factor['options']) or any('{value}' not in o for o in factor['options']):
        raise ValueError(f"{where}.options must be a list of strings each containing '{{value}}', "
                         f'got {factor["options"]!r}')
    for i, entry in enumerate(factor['values']):
        if not isinstance(entry, dict):
            continue
        if 'value' not in entry or set(entry) - {'value', 'options'}:
            raise ValueError(f'{where}.values[{i}] must be a plain value or '
                             f"dict(value=V, options=['key=...', ...]), got {entry!r}")
        if not _is_str_list(entry.get('options', [])):
            raise ValueError(f'{where}.values[{i}].options must be a list of strings, '
                             f'got {entry["options"]!r}')
    dirs = [value_dir(v) for v in factor_values(factor)]
    if len(set(dirs)) < len(dirs):
        raise ValueError(f'{where}.values must be distinct (as folder names: {dirs})')
    check_int(factor.get('figure'), f"{where}.figure (the paper's figure number)",
              allow_none=True)
    if 'label' in factor and not isinstance(factor['label'], str):
        raise ValueError(f'{where}.label must be a string (the x-axis label), '
                         f'got {factor["label"]!r}')


def _check_factor_losses(path: str, name: str, factor: dict, losses: list) -> None:
    if 'losses' not in factor:
        return
    if not _is_str_list(factor['losses']) or not factor['losses'] \
            or set(factor['losses']) - set(losses):
        raise ValueError(f'{path}: factors.{name}.losses must be a non-empty list of losses '
                         f'of the spec ({list(losses)}), got {factor["losses"]!r}')


def load_spec(path: str) -> dict:
    """Reads and checks a grid spec (see the module docstring). ``families`` comes back
    complete: every loss of the spec -> 'contrastive' | 'classification' (see
    :func:`irtbox.ops.sweeps.families.loss_families`). Raises ``FileNotFoundError`` or
    ``ValueError`` naming the file and the key at fault."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'grid spec not found: {path}')
    if path.endswith('.json'):
        spec = read_json(path)
    else:
        from mmengine.config import Config
        spec = Config.fromfile(path).to_dict()
    missing = [k for k in REQUIRED if k not in spec]
    if missing:
        raise ValueError(f'{path}: missing key(s) {missing}; a grid spec needs {list(REQUIRED)}')
    if not isinstance(spec['factors'], dict):
        raise ValueError(f'{path}: `factors` must be a dict name -> dict(values=[...], '
                         f'options=[...]), got {type(spec["factors"]).__name__}')
    for name, factor in spec['factors'].items():
        if name == OFF_THE_SHELF:
            raise ValueError(f'{path}: factor name {OFF_THE_SHELF!r} is reserved')
        _check_factor(path, name, factor)
    if 'seed_option' in spec:
        raise ValueError(f"{path}: `seed_option` is now `seed_options`, a list: "
                         f"seed_options=[{spec['seed_option']!r}]")
    seed_options = spec.get('seed_options', DEFAULT_SEED_OPTIONS)
    if not _is_str_list(seed_options) or any('{seed}' not in o for o in seed_options):
        raise ValueError(f"{path}: `seed_options` must be a list of strings each containing "
                         f"'{{seed}}', got {seed_options!r}")
    for key in ('losses', 'datasets'):
        if not isinstance(spec[key], (list, tuple)) or not spec[key]:
            raise ValueError(f'{path}: `{key}` must be a non-empty list')
    try:
        spec['families'] = loss_families(spec['config'], spec['losses'], spec['datasets'],
                                         spec.get('families'))
    except ValueError as e:
        raise ValueError(f'{path}: {e}') from e
    for name, factor in spec['factors'].items():
        _check_factor_losses(path, name, factor, spec['losses'])
    return spec


def expand(spec: dict, work_root: str) -> List[Run]:
    """All runs of a spec: factor x value x dataset x loss x seed, then off-the-shelf tests."""
    seeds = spec.get('seeds', [0])
    seed_options = spec.get('seed_options', DEFAULT_SEED_OPTIONS)
    common = list(spec.get('options', []))
    runs = []
    for factor, fspec in spec['factors'].items():
        for (value, templates), dataset, loss, seed in itertools.product(
                value_entries(fspec), spec['datasets'], fspec.get('losses', spec['losses']),
                seeds):
            options = common + [o.format(value=value) for o in templates] + [
                o.format(seed=seed) for o in seed_options]
            runs.append(Run(factor, value, dataset, loss, seed,
                            spec['config'].format(loss=loss, dataset=dataset), options,
                            osp.join(work_root, factor, value_dir(value), dataset, loss,
                                     f'seed{seed}')))
    if spec.get('off_the_shelf'):
        for dataset in spec['datasets']:
            runs.append(Run(OFF_THE_SHELF, None, dataset, '', None,
                            spec['off_the_shelf'].format(dataset=dataset), common,
                            osp.join(work_root, OFF_THE_SHELF, dataset)))
    return runs


def select_runs(runs: List[Run], spec: dict, factors=None, datasets=None, losses=None,
                seeds=None) -> List[Run]:
    """The runs within the given subsets of the spec's factors, datasets, losses and seeds
    (None: all). The off-the-shelf tests follow the dataset subset only. A value the spec
    lacks raises :class:`SelectionError`."""
    subsets = dict(factor=(factors, 'factors', list(spec['factors'])),
                   dataset=(datasets, 'datasets', list(spec['datasets'])),
                   loss=(losses, 'losses', list(spec['losses'])),
                   seed=(seeds, 'seeds', list(spec.get('seeds', [0]))))
    for chosen, key, known in subsets.values():
        unknown = [c for c in chosen or [] if c not in known]
        if unknown:
            raise SelectionError(key, f'{unknown} not in the spec, which has {known}')
    kept = []
    for run in runs:
        fields = ('dataset', ) if run.factor == OFF_THE_SHELF else tuple(subsets)
        if all(subsets[f][0] is None or getattr(run, f) in subsets[f][0] for f in fields):
            kept.append(run)
    return kept
