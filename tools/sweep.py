"""Run a grid of trainings (the training-recipe benchmark's sweeps), collect and plot them.

A grid spec is a Python, YAML or JSON file with these keys:

  config      base config path, with {loss} and {dataset} placeholders,
              e.g. 'configs/dml_benchmark/dml_dinov2-vit-b_{loss}_1xb256-39k_{dataset}.py'
  losses      list of loss names (their family, for the line style, comes from
              FAMILIES below or the spec's optional `families` dict:
              name -> 'contrastive' | 'classification')
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

Runs: factor x value x dataset x loss x seed. Each has the work dir
WORK_ROOT/<factor>/<value>/<dataset>/<loss>/seed<seed>, where training writes
its checkpoints ('best.pth' from BestWeightsEarlyStoppingHook when the config
has it, else the last checkpoint), then `train_done`; tools/test.py then writes
the test metrics to test_results.json (--out test_results.json; with
--keep-embeddings, --out test_results.npz, which writes the embeddings there and
the metrics to test_results.json as well). A run whose test_results.json exists
is finished and skipped (--force re-runs it); one with `train_done` only is
tested again. A run whose training or test fails gets a `failed` file (the
command and its exit status) and the sweep goes on with the others, since some
points of the paper's grids cannot be computed (M = 1 or 2 with batch 256 on
CUB / Cars196, Fig. 8); the tables and figures are still written, the failed
runs are listed at the end (exit status 1), and the next call retries them.

Outputs in WORK_ROOT: runs.csv / runs.json (one row per finished run),
summary.csv (mean, std, min, max over seeds) and the figures
fig_<factor>_<metric>.png, or fig<N>_<factor>_<metric>.png for a factor with
`figure` (tools/analysis_tools/plot_sweep.py).

Examples:
  python tools/sweep.py configs/dml_benchmark/sweeps/digits_tiny.py --work-root work_dirs/sweep
  python tools/sweep.py SPEC --work-root W --jobs 2              # two runs at a time
  python tools/sweep.py SPEC --work-root W --datasets cub --losses arcface --seeds 0  # a part
  python tools/sweep.py SPEC --work-root W --dry-run             # list the runs and their state
  python tools/sweep.py SPEC --work-root W --emit dist --gpus 8 > jobs.sh
  python tools/sweep.py SPEC --work-root W --emit slurm --partition gpu
  python tools/sweep.py SPEC --work-root W --collect-only        # table and figures only
Run it (and the emitted commands) from the repository root.
"""
import argparse
import csv
import itertools
import json
import math
import os
import os.path as osp
import re
import shlex
import queue
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Dict, List, NamedTuple, Optional

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

# The 12 losses of Berton, Musgrave & Masone and their family (line style of the figures).
FAMILIES = {
    'contrastive': 'contrastive', 'circle': 'contrastive', 'multisimilarity': 'contrastive',
    'ntxent': 'contrastive', 'signaltonoiseratiocontrastive': 'contrastive',
    'snr': 'contrastive', 'snrcontrastive': 'contrastive',
    'thresholdconsistentmargin': 'contrastive', 'tcm': 'contrastive',
    'tripletmargin': 'contrastive', 'triplet': 'contrastive',
    'arcface': 'classification', 'cosface': 'classification',
    'normalizedsoftmax': 'classification', 'normsoftmax': 'classification',
    'proxyanchor': 'classification',
    'softtriple': 'classification',
}
RESULTS = 'test_results.json'
# tools/test.py writes a .npz's metrics to the same name with .json: RESULTS.
EMBEDDINGS = osp.splitext(RESULTS)[0] + '.npz'
TRAIN_DONE = 'train_done'
FAILED = 'failed'
OFF_THE_SHELF = 'off_the_shelf'
REQUIRED = ('config', 'losses', 'datasets', 'factors')
FACTOR_KEYS = ('values', 'options', 'log_x', 'figure', 'label', 'losses')
DEFAULT_SEED_OPTIONS = ['randomness.seed={seed}']


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


def _key(name: str) -> str:
    return re.sub(r'[^a-z0-9]', '', name.lower())


def family_of(loss: str, families: Optional[Dict[str, str]] = None) -> str:
    families = {**{_key(k): v for k, v in FAMILIES.items()},
                **{_key(k): v for k, v in (families or {}).items()}}
    if _key(loss) not in families:
        raise ValueError(f"loss {loss!r} has no family; add it to the spec's `families` "
                         "dict as 'contrastive' or 'classification'")
    return families[_key(loss)]


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
        raise SystemExit(f'{where} must be dict(values=[...non-empty], '
                         "options=['key={value}', ...])")
    unknown = sorted(set(factor) - set(FACTOR_KEYS))
    if unknown:
        raise SystemExit(f'{where}: unknown key(s) {unknown}; expected some of {list(FACTOR_KEYS)}')
    if not _is_str_list(factor['options']) or any('{value}' not in o for o in factor['options']):
        raise SystemExit(f"{where}.options must be a list of strings each containing '{{value}}', "
                         f'got {factor["options"]!r}')
    for i, entry in enumerate(factor['values']):
        if not isinstance(entry, dict):
            continue
        if 'value' not in entry or set(entry) - {'value', 'options'}:
            raise SystemExit(f'{where}.values[{i}] must be a plain value or '
                             f"dict(value=V, options=['key=...', ...]), got {entry!r}")
        if not _is_str_list(entry.get('options', [])):
            raise SystemExit(f'{where}.values[{i}].options must be a list of strings, '
                             f'got {entry["options"]!r}')
    dirs = [value_dir(v) for v in factor_values(factor)]
    if len(set(dirs)) < len(dirs):
        raise SystemExit(f'{where}.values must be distinct (as folder names: {dirs})')
    figure = factor.get('figure')
    if figure is not None and (not isinstance(figure, int) or isinstance(figure, bool)):
        raise SystemExit(f"{where}.figure must be an int (the paper's figure number), "
                         f'got {figure!r}')
    if 'label' in factor and not isinstance(factor['label'], str):
        raise SystemExit(f'{where}.label must be a string (the x-axis label), '
                         f'got {factor["label"]!r}')


def _check_factor_losses(path: str, name: str, factor: dict, losses: list) -> None:
    if 'losses' not in factor:
        return
    if not _is_str_list(factor['losses']) or not factor['losses'] \
            or set(factor['losses']) - set(losses):
        raise SystemExit(f'{path}: factors.{name}.losses must be a non-empty list of losses '
                         f'of the spec ({list(losses)}), got {factor["losses"]!r}')


def load_spec(path: str) -> dict:
    """Reads and checks a grid spec (see the module docstring)."""
    if not osp.isfile(path):
        raise SystemExit(f'grid spec not found: {path}')
    if path.endswith('.json'):
        with open(path) as f:
            spec = json.load(f)
    else:
        from mmengine.config import Config
        spec = Config.fromfile(path).to_dict()
    missing = [k for k in REQUIRED if k not in spec]
    if missing:
        raise SystemExit(f'{path}: missing key(s) {missing}; a grid spec needs {list(REQUIRED)}')
    if not isinstance(spec['factors'], dict):
        raise SystemExit(f'{path}: `factors` must be a dict name -> dict(values=[...], '
                         f'options=[...]), got {type(spec["factors"]).__name__}')
    for name, factor in spec['factors'].items():
        if name == OFF_THE_SHELF:
            raise SystemExit(f'{path}: factor name {OFF_THE_SHELF!r} is reserved')
        _check_factor(path, name, factor)
    if 'seed_option' in spec:
        raise SystemExit(f"{path}: `seed_option` is now `seed_options`, a list: "
                         f"seed_options=[{spec['seed_option']!r}]")
    seed_options = spec.get('seed_options', DEFAULT_SEED_OPTIONS)
    if not _is_str_list(seed_options) or any('{seed}' not in o for o in seed_options):
        raise SystemExit(f"{path}: `seed_options` must be a list of strings each containing "
                         f"'{{seed}}', got {seed_options!r}")
    for key in ('losses', 'datasets'):
        if not isinstance(spec[key], (list, tuple)) or not spec[key]:
            raise SystemExit(f'{path}: `{key}` must be a non-empty list')
    for loss in spec['losses']:
        try:
            family_of(loss, spec.get('families'))
        except ValueError as e:
            raise SystemExit(f'{path}: {e}')
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
    (None: all). The off-the-shelf tests follow the dataset subset only."""
    subsets = dict(factor=(factors, '--only', list(spec['factors'])),
                   dataset=(datasets, '--datasets', list(spec['datasets'])),
                   loss=(losses, '--losses', list(spec['losses'])),
                   seed=(seeds, '--seeds', list(spec.get('seeds', [0]))))
    for chosen, option, known in subsets.values():
        unknown = [c for c in chosen or [] if c not in known]
        if unknown:
            raise SystemExit(f'{option}: {unknown} not in the spec, which has {known}')
    kept = []
    for run in runs:
        fields = ('dataset', ) if run.factor == OFF_THE_SHELF else tuple(subsets)
        if all(subsets[f][0] is None or getattr(run, f) in subsets[f][0] for f in fields):
            kept.append(run)
    return kept


def state_of(run: Run) -> str:
    """'done' (test metrics written), 'failed' (the last attempt), 'trained'
    (test missing) or 'todo'."""
    if osp.isfile(osp.join(run.work_dir, RESULTS)):
        return 'done'
    if osp.isfile(osp.join(run.work_dir, FAILED)):
        return 'failed'
    if run.factor == OFF_THE_SHELF:
        return 'trained'
    return 'trained' if osp.isfile(osp.join(run.work_dir, TRAIN_DONE)) else 'todo'


def checkpoint_of(work_dir: str) -> str:
    """The weights to test: best.pth (early stopping) or the last checkpoint."""
    best = osp.join(work_dir, 'best.pth')
    if osp.isfile(best):
        return best
    last = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(last):
        with open(last) as f:
            return f.read().strip()
    raise FileNotFoundError(f'{work_dir}: training finished but left neither best.pth nor '
                            'last_checkpoint (does the config have a CheckpointHook?)')


def _train_args(run: Run) -> List[str]:
    return ['--work-dir', run.work_dir] + (['--cfg-options'] + run.options if run.options else [])


def _test_args(run: Run, keep_embeddings: bool = False) -> List[str]:
    return ['--work-dir', osp.join(run.work_dir, 'test'),
            '--out', osp.join(run.work_dir, EMBEDDINGS if keep_embeddings else RESULTS)] + (
                ['--cfg-options'] + run.options if run.options else [])


def emit_command(run: Run, mode: str, gpus: int = 1, partition: str = 'gpu',
                 keep_embeddings: bool = False) -> str:
    """One shell line that trains (unless off-the-shelf), tests and marks the run."""
    q = lambda args: ' '.join(shlex.quote(str(a)) for a in args)  # noqa: E731
    py = shlex.quote(sys.executable)
    ckpt = ('"$( [ -f {d}/best.pth ] && echo {d}/best.pth || cat {d}/last_checkpoint )"'
            .format(d=shlex.quote(run.work_dir)))
    if run.factor == OFF_THE_SHELF:
        ckpt = ''
    job = shlex.quote(f'{run.factor}-{value_dir(run.value)}-{run.dataset}-{run.loss}-{run.seed}')
    test_args = q(_test_args(run, keep_embeddings))
    if mode == 'plain':
        train = f'{py} tools/train.py {q([run.config] + _train_args(run))}'
        test = f'{py} tools/test.py {shlex.quote(run.config)} {ckpt} {test_args}'
    elif mode == 'dist':
        train = f'tools/dist_train.sh {shlex.quote(run.config)} {gpus} {q(_train_args(run))}'
        test = f'tools/dist_test.sh {shlex.quote(run.config)} {ckpt} {gpus} {test_args}'
    elif mode == 'slurm':
        train = (f'GPUS={gpus} tools/slurm_train.sh {shlex.quote(partition)} {job} '
                 f'{q([run.config] + _train_args(run))}')
        test = (f'GPUS={gpus} tools/slurm_test.sh {shlex.quote(partition)} {job} '
                f'{shlex.quote(run.config)} {ckpt} {test_args}')
    else:
        raise ValueError(f"emit mode must be 'plain', 'dist' or 'slurm', got {mode!r}")
    if run.factor == OFF_THE_SHELF:
        # No checkpoint, which the dist/slurm test scripts require: one process.
        test = f'{py} tools/test.py {shlex.quote(run.config)} {test_args}'
    steps = [f'mkdir -p {shlex.quote(run.work_dir)}']
    if run.factor != OFF_THE_SHELF:
        steps += [train, f'touch {shlex.quote(osp.join(run.work_dir, TRAIN_DONE))}']
    return ' && '.join(steps + [test])


LOG = 'sweep.log'


def run_one(run: Run, keep_embeddings: bool = False, env: Optional[dict] = None) -> None:
    """Trains (unless already trained) and tests one run in subprocesses whose
    output goes to ``<work_dir>/sweep.log``; a failing step raises
    ``subprocess.CalledProcessError``. ``env``: extra environment variables."""
    os.makedirs(run.work_dir, exist_ok=True)
    failed = osp.join(run.work_dir, FAILED)
    if osp.isfile(failed):
        os.remove(failed)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''),
               **(env or {}))
    with open(osp.join(run.work_dir, LOG), 'a') as log:
        def call(args):
            subprocess.run([sys.executable] + args, check=True, env=env, stdout=log,
                           stderr=subprocess.STDOUT)

        if not osp.isfile(osp.join(run.work_dir, TRAIN_DONE)) and run.factor != OFF_THE_SHELF:
            call([osp.join(ROOT, 'tools', 'train.py'), run.config] + _train_args(run))
            open(osp.join(run.work_dir, TRAIN_DONE), 'w').close()
        ckpt = [] if run.factor == OFF_THE_SHELF else [checkpoint_of(run.work_dir)]
        call([osp.join(ROOT, 'tools', 'test.py'), run.config] + ckpt
             + _test_args(run, keep_embeddings))


def _job_devices(jobs: int) -> List[Optional[str]]:
    """The CUDA device each of ``jobs`` parallel runs gets: one GPU each when
    there are enough visible ones, else none pinned (the runs share)."""
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    if visible is not None:
        devices = [d for d in visible.split(',') if d.strip()]
    else:
        import torch
        devices = [str(i) for i in range(torch.cuda.device_count())]
    return devices[:jobs] if len(devices) >= jobs else [None] * jobs


def _tail(path: str, lines: int = 5) -> str:
    if not osp.isfile(path):
        return ''
    with open(path, errors='replace') as f:
        return ''.join(f.readlines()[-lines:])


def run_all(todo: List[Run], jobs: int = 1, keep_embeddings: bool = False) -> None:
    """Runs ``todo``, ``jobs`` at a time, and prints one line per finished
    run. With ``jobs > 1`` each run gets ``cpu_count // jobs`` CPU threads
    and, when there are at least ``jobs`` visible GPUs, a GPU of its own. A
    failed run gets a ``failed`` file and the others go on: some points
    cannot be computed (e.g. M = 1 with batch 256 on a dataset of 80 training
    classes, paper Fig. 8)."""
    slots = queue.Queue()
    for device in _job_devices(jobs) if jobs > 1 else [None]:
        slots.put(device)
    threads = str(max(1, (os.cpu_count() or 1) // jobs))

    def work(run: Run):
        device = slots.get()
        env = dict(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads) if jobs > 1 else {}
        if device is not None:
            env['CUDA_VISIBLE_DEVICES'] = device
        start = time.time()
        try:
            run_one(run, keep_embeddings, env)
            return None, time.time() - start
        except subprocess.CalledProcessError as error:
            reason = f'exit status {error.returncode}: {shlex.join(error.cmd)}'
        except FileNotFoundError as error:  # trained, but no checkpoint to test
            reason = str(error)
        finally:
            slots.put(device)
        with open(osp.join(run.work_dir, FAILED), 'w') as f:
            f.write(reason + '\n')
        return reason, time.time() - start

    # Runs are submitted from this thread only, one per finished run, so that after an
    # interruption nothing new starts (the running ones got the signal too).
    pool = ThreadPoolExecutor(max_workers=jobs)
    waiting, running, finished = iter(todo), {}, 0

    def submit_next():
        run = next(waiting, None)
        if run is not None:
            running[pool.submit(work, run)] = run

    try:
        for _ in range(jobs):
            submit_next()
        while running:
            for future in wait(running, return_when=FIRST_COMPLETED).done:
                run = running.pop(future)
                reason, seconds = future.result()
                finished += 1
                if reason is None:
                    with open(osp.join(run.work_dir, RESULTS)) as f:
                        metrics = json.load(f)
                    shown = '  '.join(f'{k} {v:.4f}' for k, v in sorted(metrics.items()))
                    print(f'[{finished}/{len(todo)}] {run.work_dir}  {seconds:.0f} s  {shown}',
                          file=sys.stderr)
                else:
                    log = osp.join(run.work_dir, LOG)
                    print(f'[{finished}/{len(todo)}] {run.work_dir}  FAILED ({reason}); end of '
                          f'{log}:\n{_tail(log)}', file=sys.stderr)
                submit_next()
    except KeyboardInterrupt:
        pool.shutdown(wait=True)
        raise SystemExit('interrupted: finished runs are kept, the others run on the next '
                         'call')
    pool.shutdown(wait=True)


def collect(runs: List[Run], families: Optional[Dict[str, str]] = None) -> List[dict]:
    """One row per finished run: the run's coordinates plus its test metrics."""
    rows = []
    for run in runs:
        path = osp.join(run.work_dir, RESULTS)
        if not osp.isfile(path):
            continue
        try:
            with open(path) as f:
                metrics = json.load(f)
        except json.JSONDecodeError as e:
            raise SystemExit(f'{path}: not valid JSON ({e}); delete it to re-test the run')
        if not isinstance(metrics, dict):
            raise SystemExit(f'{path}: expected a JSON object metric name -> value')
        rows.append(dict(
            factor=run.factor, value=run.value, dataset=run.dataset, loss=run.loss,
            family='' if run.factor == OFF_THE_SHELF else family_of(run.loss, families),
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
            mean = sum(vals) / len(vals)
            out.append(dict(factor=first['factor'], value=first['value'],
                            dataset=first['dataset'], loss=first['loss'],
                            family=first['family'], metric=metric, n=len(vals), mean=mean,
                            std=math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)),
                            min=min(vals), max=max(vals)))
    return out


def write_table(rows: List[dict], path: str) -> None:
    """CSV (``path``.csv) or JSON (``path``.json) with one line per row."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    if path.endswith('.json'):
        with open(path, 'w') as f:
            json.dump(rows, f, indent=1)
        return
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Run, collect and plot a grid of irtbox trainings.', epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('spec', help='grid spec (.py, .yaml or .json)')
    parser.add_argument('--work-root', required=True, help='folder of all the runs and outputs')
    parser.add_argument('--emit', choices=['plain', 'dist', 'slurm'],
                        help='print one shell command per unfinished run instead of running it')
    parser.add_argument('--jobs', type=int, default=1,
                        help='runs at a time when running them here (default 1); each gets '
                        'cpu_count/jobs threads and, with >= jobs visible GPUs, its own GPU')
    parser.add_argument('--gpus', type=int, default=1, help='processes per run for --emit dist/slurm')
    parser.add_argument('--partition', default='gpu', help='slurm partition for --emit slurm')
    parser.add_argument('--only', nargs='+', metavar='FACTOR', help='only these factors')
    parser.add_argument('--datasets', nargs='+', metavar='DATASET',
                        help="only these of the spec's datasets")
    parser.add_argument('--losses', nargs='+', metavar='LOSS', help="only these of the spec's losses")
    parser.add_argument('--seeds', nargs='+', type=int, metavar='SEED',
                        help="only these of the spec's seeds")
    parser.add_argument('--dry-run', action='store_true', help='list the runs and their state')
    parser.add_argument('--collect-only', action='store_true',
                        help='run nothing: write the tables and figures of the finished runs')
    parser.add_argument('--force', action='store_true', help='re-run finished runs')
    parser.add_argument('--keep-embeddings', action='store_true',
                        help="also write each run's test_results.npz (embeddings; large)")
    parser.add_argument('--band', choices=['minmax', 'std'], default='minmax',
                        help='shaded band around the mean over seeds: min-max or mean +- std')
    parser.add_argument('--no-plot', action='store_true', help='tables only')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f'--jobs must be >= 1, got {args.jobs}')
    spec = load_spec(args.spec)
    runs = expand(spec, args.work_root)
    runs = select_runs(runs, spec, factors=args.only, datasets=args.datasets,
                       losses=args.losses, seeds=args.seeds)
    if args.force and not (args.dry_run or args.collect_only):
        for run in runs:
            # The old embeddings too: they would not match the new results.
            for name in (RESULTS, TRAIN_DONE, EMBEDDINGS, FAILED):
                if osp.isfile(osp.join(run.work_dir, name)):
                    os.remove(osp.join(run.work_dir, name))
    if args.dry_run:
        for run in runs:
            print(f'{state_of(run):8s} {run.work_dir}  {run.config}  {" ".join(run.options)}')
        return runs
    if args.emit:
        for run in runs:
            if state_of(run) != 'done':
                print(emit_command(run, args.emit, args.gpus, args.partition,
                                   args.keep_embeddings))
        return runs
    if not args.collect_only:
        todo = [r for r in runs if state_of(r) != 'done']
        print(f'{len(runs) - len(todo)} of {len(runs)} runs finished; running {len(todo)}, '
              f'{args.jobs} at a time (each run\'s output: <its work dir>/{LOG})',
              file=sys.stderr)
        run_all(todo, args.jobs, args.keep_embeddings)
    failures = [r.work_dir for r in runs if state_of(r) == 'failed']
    rows = collect(runs, spec.get('families'))
    if not rows:
        raise SystemExit(f'no finished run under {args.work_root} (no {RESULTS} found)'
                         + (f'; {len(failures)} failed' if failures else ''))
    summary = summarize(rows)
    write_table(rows, osp.join(args.work_root, 'runs.csv'))
    write_table(rows, osp.join(args.work_root, 'runs.json'))
    write_table(summary, osp.join(args.work_root, 'summary.csv'))
    if not args.no_plot:
        from tools.analysis_tools.plot_sweep import plot_all
        for path in plot_all(summary, spec, args.work_root, band=args.band):
            print(path)
    if failures and not args.collect_only:
        raise SystemExit(f'{len(failures)} run(s) failed (their folders hold a `{FAILED}` '
                         'file; the next call retries them):\n  ' + '\n  '.join(failures))
    return rows


if __name__ == '__main__':
    sys.path.insert(0, ROOT)
    main()
