"""Kinds of configs: what a rehearsal of a config exercises, so that rehearsing one config of each
kind covers every shipped config. A config's kind (:func:`config_kind`) is made of the parts of a
run that have their own code and can fail on their own: the backbone family, the necks, the losses,
the hooks, the training sampler, the train loop, whether training validates (a checkpoint then falls
on a validation iteration, and ranks exchange the validation's gathers), the optimizer wrapper
(whose autocast the rehearsal forces on, as a GPU run has it) and every dataset type read. Two
configs of one kind differ only in numbers, which the rehearsal replaces by its own anyway. CI
rehearses the cheapest config of each kind (:func:`rehearsal_set`)."""
import functools
import glob
import os
import os.path as osp
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from mmengine.config import Config

from irtbox.registry import type_name
from irtbox.utils.config import CONFIGS_DIR
from irtbox.utils.mmengine_compat import configs_parsed_once
from .miniaturize import loader_cfgs, timm_kwargs, timm_model
from .rehearse import RehearsalReport, prepare_rehearsal, rehearse, rehearse_batch

__all__ = ['KINDS_PER_SESSION', 'ConfigKind', 'KindRehearsal', 'config_kind', 'shipped_configs',
           'rehearsal_cost', 'rehearsal_set', 'rehearse_kinds']

# The loops train_cfg names through ``max_epochs`` / ``max_iters`` without a ``type``.
_LOOP_BY_KEY = (('max_epochs', 'EpochBasedTrainLoop'), ('max_iters', 'IterBasedTrainLoop'))


@dataclass(frozen=True)
class ConfigKind:
    """What a rehearsal of a config exercises (see the module doc). Every field is a tuple of
    type names (or one name), so kinds compare, hash and sort."""
    backbone: str
    necks: Tuple[str, ...]
    losses: Tuple[str, ...]
    hooks: Tuple[str, ...]
    sampler: str
    loop: str
    validates: str  # 'val' when training validates, else '-'
    optim_wrapper: str
    datasets: Tuple[str, ...]

    def describe(self) -> str:
        """One line: the fields, each named."""
        return '; '.join(f'{name} {_join(getattr(self, name))}'
                         for name in self.__dataclass_fields__)


def _join(value) -> str:
    if isinstance(value, tuple):
        return '[' + ', '.join(value) + ']' if value else '-'
    return value or '-'


_ARCH_CACHE: Dict[str, Tuple[str, int]] = {}


def _backbone_arch(backbone: dict) -> Tuple[str, int]:
    """(architecture, parameter count) of a backbone config; the architecture is the timm
    class, with its patch embedding's class when that is not the plain ``PatchEmbed``."""
    if type_name(backbone) != 'TimmBackbone':
        return type_name(backbone), 0
    key = repr((backbone['model_name'], sorted((k, repr(v))
                                               for k, v in timm_kwargs(backbone).items())))
    if key not in _ARCH_CACHE:
        model = timm_model(backbone)
        arch = type(model).__name__
        embed = getattr(model, 'patch_embed', None)
        if embed is not None and type(embed).__name__ != 'PatchEmbed':
            arch += f'+{type(embed).__name__}'
        _ARCH_CACHE[key] = arch, sum(p.numel() for p in model.parameters())
    return _ARCH_CACHE[key]


def _loss_names(losses: dict) -> List[str]:
    names = []
    for loss in (losses or {}).values():
        if not isinstance(loss, dict):
            continue
        name = type_name(loss)
        if name == 'PMLLoss':
            name = f'PMLLoss:{loss.get("name")}'
            if loss.get('miner'):
                miner = loss['miner']
                name += f'+miner:{type_name(miner) if isinstance(miner, dict) else miner}'
        if loss.get('partial_fc'):
            name += '+PartialFC'
        names.append(name)
    return names


def _dataset_name(dataset: dict) -> str:
    """``Wrapper(Inner)`` for wrapped datasets, else the type."""
    inner = dataset.get('dataset')
    name = type_name(dataset)
    return f'{name}({_dataset_name(inner)})' if isinstance(inner, dict) else name


def config_kind(cfg: Config) -> ConfigKind:
    """The kind of ``cfg`` (see the module doc)."""
    model = cfg.get('model') or {}
    backbone = model.get('backbone') or {}
    arch, _ = _backbone_arch(backbone)
    if type_name(backbone) == 'TimmBackbone':
        arch += f'(pos_embed={backbone.get("pos_embed", "timm")})'
    neck = model.get('neck') or []
    necks = [type_name(n) for n in (neck if isinstance(neck, (list, tuple)) else [neck])]
    if model.get('whitening'):
        necks.append(f'whitening:{type_name(model["whitening"])}')
    losses = sorted(_loss_names((model.get('head') or {}).get('losses')))
    if model.get('momentum') is not None:
        losses.append('momentum encoder')
    hooks = sorted(type_name(h) for h in cfg.get('custom_hooks') or [])
    train_loader = cfg.get('train_dataloader') or {}
    sampler = train_loader.get('sampler') or {}
    sampler_name = type_name(sampler)
    if sampler_name == 'MPerClassSampler' and int(sampler.get('m', 4)) == 1:
        sampler_name += '(m=1)'
    train_cfg = cfg.get('train_cfg') or {}
    loop = type_name(train_cfg) or next(
        (name for key, name in _LOOP_BY_KEY if key in train_cfg), '')
    validates = all(cfg.get(key) for key in ('val_dataloader', 'val_cfg', 'val_evaluator'))
    datasets = []
    for _, loader in loader_cfgs(cfg):
        if isinstance(loader.get('dataset'), dict):
            name = _dataset_name(loader['dataset'])
            if name not in datasets:
                datasets.append(name)
    wrapper = type_name(cfg.get('optim_wrapper') or {}) or 'OptimWrapper'
    return ConfigKind(arch, tuple(necks), tuple(losses), tuple(hooks), sampler_name, loop,
                      'val' if validates else '', wrapper, tuple(datasets))


def shipped_configs(root: str = CONFIGS_DIR) -> Dict[str, Config]:
    """{path: config} of every config irtbox ships that trains a model (``_base_`` parts and
    sweep specs, which name configs rather than being one, are left out), sorted by path."""
    cfgs = {}
    with configs_parsed_once():  # the bases they share parsed once, not once a config
        for path in sorted(glob.glob(osp.join(root, '**', '*.py'), recursive=True)):
            if '_base_' in osp.relpath(path, root).split(osp.sep):
                continue
            cfg = Config.fromfile(path)
            if cfg.get('model') and cfg.get('train_dataloader'):
                cfgs[path] = cfg
    return cfgs


def rehearsal_cost(cfg: Config) -> Tuple[int, int]:
    """What ranks the configs of a kind by the time their rehearsal takes: the backbone's
    parameter count first (the rehearsal scales every input to one size, so the model's size
    decides), then the number of test sets."""
    _, params = _backbone_arch((cfg.get('model') or {}).get('backbone') or {})
    tests = sum(1 for where, _ in loader_cfgs(cfg) if where.startswith('test_dataloader'))
    return params, tests


def rehearsal_set(cfgs: Optional[Dict[str, Config]] = None) -> List[Tuple[ConfigKind, str]]:
    """(kind, the cheapest config of that kind) for every kind among ``cfgs`` ({path: config},
    default: :func:`shipped_configs`); ties go to the first path in sorted order."""
    cfgs = shipped_configs() if cfgs is None else cfgs
    groups: Dict[ConfigKind, List[str]] = {}  # kinds in first-seen order
    for path, cfg in cfgs.items():
        groups.setdefault(config_kind(cfg), []).append(path)
    return [(kind, min(sorted(members), key=lambda p: rehearsal_cost(cfgs[p])))
            for kind, members in groups.items()]


@dataclass
class KindRehearsal:
    """One rehearsal of :func:`rehearse_kinds`: the kind, its config, and the report (None
    when the rehearsal could not start, ``error`` then says why)."""
    kind: ConfigKind
    config: str
    report: Optional[RehearsalReport] = None
    error: str = ''

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.report.phases) if self.report else 0.0


def _drop_weights(work_dir: str) -> None:
    """A passed rehearsal's checkpoints and stand-in weights (GBs for a ViT-B); its report,
    logs and probe records stay."""
    for pattern in ('run/*.pth', 'weights/*.pth'):
        for path in glob.glob(osp.join(work_dir, pattern)):
            os.remove(path)


def _announce(position: str, kind: ConfigKind, config: str, echo) -> str:
    name = osp.splitext(osp.basename(config))[0]
    echo(f'[rehearse] kind {position}: {name} ({kind.describe()})')
    return name


def _outcome(position: str, name: str, result: KindRehearsal, folder: str, keep_weights: bool,
             echo) -> KindRehearsal:
    failure = result.report.first_failure
    echo(f'[rehearse] kind {position}: {name}: '
         + ('passed' if failure is None else f'FAILED: {failure.name}: {failure.detail}')
         + f' ({result.seconds:.0f} s)')
    if failure is None and not keep_weights:
        _drop_weights(folder)
    return result


def _could_not_start(position: str, name: str, kind: ConfigKind, config: str, error, echo):
    result = KindRehearsal(kind, config, error=f'{type(error).__name__}: {error}')
    echo(f'[rehearse] kind {position}: {name}: could not start: {result.error}')
    return result


def _rehearse_one(position: str, kind: ConfigKind, config: str, work_dir: str,
                  keep_weights: bool, options: dict, echo=print) -> KindRehearsal:
    name = _announce(position, kind, config, echo)
    folder = osp.join(work_dir, name)
    try:
        report = rehearse(config, folder, echo=lambda line: None, **options)
    except Exception as error:  # noqa: BLE001  (one kind that cannot start stops no other)
        return _could_not_start(position, name, kind, config, error, echo)
    return _outcome(position, name, KindRehearsal(kind, config, report), folder, keep_weights,
                    echo)


def _rehearse_batch(tasks: list, plan: str, echo=print) -> List[KindRehearsal]:
    """The kinds of ``tasks`` (arguments of :func:`_rehearse_one`) in one launcher session
    (:func:`~irtbox.ops.rehearse.rehearse_batch`, its plan ``plan``); a kind the session ended
    before is rehearsed again in a session of its own, so that a crash or a hang is its own."""
    if len(tasks) == 1:
        return [_rehearse_one(*tasks[0], echo=echo)]
    work_dir, options = tasks[0][3], tasks[0][5]
    miniature = {k: v for k, v in options.items()
                 if k not in ('nproc', 'timeout', 'cfg_options', 'one_session')}
    results, members = {}, []
    for i, (position, kind, config, _, _, _) in enumerate(tasks):
        name = _announce(position, kind, config, echo)
        folder = osp.join(work_dir, name)
        try:
            members.append((i, (config, folder, prepare_rehearsal(
                config, folder, options.get('cfg_options'), **miniature))))
        except Exception as error:  # noqa: BLE001  (one kind that cannot start stops no other)
            results[i] = _could_not_start(position, name, kind, config, error, echo)
    reports = rehearse_batch([member for _, member in members], plan, options.get('nproc', 2),
                             options.get('timeout', 600)) if members else []
    for (i, (config, folder, _)), report in zip(members, reports):
        position, kind = tasks[i][0], tasks[i][1]
        name = osp.basename(folder)
        if report is None:
            echo(f'[rehearse] kind {position}: {name}: its batch session ended before it did '
                 '(a crash or a hang): rehearsed again in a session of its own')
            results[i] = _rehearse_one(*tasks[i], echo=echo)
        else:
            results[i] = _outcome(position, name, KindRehearsal(kind, config, report), folder,
                                  tasks[i][4], echo)
    return [results[i] for i in range(len(tasks))]


#: Kinds a quick session holds at most: 6 makes the sessions 6 times fewer than the kinds
#: while the last one to end stays short (docs/reliability.md, "Every kind of config").
KINDS_PER_SESSION = 6


def rehearse_kinds(work_dir: str, configs: Optional[List[Tuple[ConfigKind, str]]] = None,
                   echo: Callable[[str], None] = print, keep_weights: bool = False,
                   jobs: int = 1, kinds_per_session: int = KINDS_PER_SESSION,
                   **options) -> List[KindRehearsal]:
    """Rehearse one config of every kind (``configs``, default :func:`rehearsal_set`), each in
    ``<work_dir>/<config name>``, ``jobs`` at a time (each in a process of its own, its output
    printed; with several, every phase gets ``cpu_count // jobs`` threads unless ``OMP_NUM_THREADS``
    is set); ``options``: those of :func:`~irtbox.ops.rehearse.rehearse`. With ``one_session``,
    up to ``kinds_per_session`` kinds share one launcher session (fewer where that leaves a
    job without a session: ``ceil(kinds / jobs)`` at most), its plan and log in
    ``<work_dir>/sessions``; each kind is still checked on its own work dir, and ``timeout``
    is each kind's. A passed rehearsal's weights are removed unless ``keep_weights``. Returns
    the results in the order of ``configs``."""
    configs = rehearsal_set() if configs is None else configs
    tasks = [(f'{i}/{len(configs)}', kind, config, work_dir, keep_weights, options)
             for i, (kind, config) in enumerate(configs, 1)]
    size = min(kinds_per_session, -(-len(tasks) // jobs)) if options.get('one_session') else 1
    count = -(-len(tasks) // size) if tasks else 0
    # Every count-th kind: the kinds come sorted by path, a family's (and its cost) together,
    # so each session gets a mix and the sessions take about as long.
    batches = [list(range(first, len(tasks), count)) for first in range(count)]
    calls = [([tasks[i] for i in batch], osp.join(work_dir, 'sessions', f'session_{n}.json'))
             for n, batch in enumerate(batches, 1)]
    if jobs <= 1:
        outcomes = [_rehearse_batch(*call, echo=echo) for call in calls]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        os.environ.setdefault('OMP_NUM_THREADS', str(max(1, (os.cpu_count() or 1) // jobs)))
        # spawn: a forked copy of this process would carry its torch state into every worker.
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context('spawn')) as pool:
            echo_flushed = functools.partial(print, flush=True)
            futures = [pool.submit(_rehearse_batch, *call, echo=echo_flushed) for call in calls]
            outcomes = [future.result() for future in futures]
    results = {i: result for batch, outcome in zip(batches, outcomes)
               for i, result in zip(batch, outcome)}
    return [results[i] for i in range(len(tasks))]
