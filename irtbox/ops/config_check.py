"""Every key of a config checked against what it configures, before any work.

A misspelled argument (``default_hooks.checkpoint.intervall``) would otherwise surface as a
bare ``TypeError`` when that part is built, for a hook argument forwarded to
``Runner.save_checkpoint`` after the whole training.

A ``dict(type=...)`` is resolved through the registry of the section it sits in; the accepted keys
are the constructor's parameters. A constructor taking ``**kwargs`` is not checked (its build names
a wrong key before the first iteration, and a rehearsal builds every part), except
``CheckpointHook``, whose ``**kwargs`` go to ``Runner.save_checkpoint``. A type no registry knows is
left to the build; entries that hold no part (``init_cfg``, ``paramwise_cfg``, ...) are not checked.

Values checked first, without the registries (:func:`irtbox.ops.config_inputs.check_config_values`,
which the check of a command's inputs runs before it imports torch): wherever they sit, the
well-known keys of its ``VALUE_RULES`` (``lr``, ``max_iters``, ``batch_size``, ``betas``, ...)."""
import difflib
import functools
import inspect
from typing import Any, Callable, Iterable, Optional, Set, Tuple

import mmengine.runner  # noqa: F401  (registers MMEngine's hooks, loops)
import torch
from mmengine.config import Config
from mmengine.utils import import_modules_from_strings
from torch.utils.data import DataLoader

import irtbox.engine  # noqa: F401  (registers the runner, hooks, loops)
from irtbox.engine.runner import DEFAULT_HOOKS
from irtbox.ops.config_inputs import check_config_values
from irtbox.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, HOOKS, LOOPS, METRICS, MODELS,
                             OPTIM_WRAPPERS, OPTIMIZERS, PARAM_SCHEDULERS, RUNNERS, SEARCHERS,
                             TRANSFORMS)
from irtbox.utils.config import ConfigError

__all__ = ['check_config_keys', 'accepted_keys']

_SKIP = 'skip'  # an entry that holds no registered part: not checked
# The registry of a nested ``dict(type=...)`` by the key it sits under; other keys keep the
# registry of the part that holds them.
_CHILD_REGISTRIES = {
    'dataset': (DATASETS, ), 'datasets': (DATASETS, ),
    'pipeline': (TRANSFORMS, ), 'transforms': (TRANSFORMS, ),
    'sampler': (DATA_SAMPLERS, ), 'batch_sampler': (DATA_SAMPLERS, ),
    'search': (SEARCHERS, ), 'searcher': (SEARCHERS, ),
    'optimizer': (OPTIMIZERS, ), 'metrics': (METRICS, ),
    'init_cfg': _SKIP, 'collate_fn': _SKIP, 'worker_init_fn': _SKIP, 'paramwise_cfg': _SKIP,
    'constructor': _SKIP,
}
# The types MMEngine's Runner (and IrtboxRunner, DEFAULT_HOOKS) give default hooks that name none.
_DEFAULT_HOOK_TYPES = dict(
    runtime_info='RuntimeInfoHook', timer='IterTimerHook', sampler_seed='DistSamplerSeedHook',
    logger='LoggerHook', param_scheduler='ParamSchedulerHook', checkpoint='CheckpointHook',
    **DEFAULT_HOOKS)
# Keys MMEngine's Runner.build_dataloader reads itself before the rest goes to DataLoader.
_DATALOADER_OWN = {'dataset', 'sampler', 'batch_sampler', 'collate_fn', 'worker_init_fn',
                   'num_batch_per_epoch', 'disable_subprocess_warning'}


def check_config_keys(cfg: Config, path: Optional[str] = None) -> None:
    """Raise :class:`~irtbox.utils.config.ConfigError` at the first key of ``cfg`` that the
    part it configures does not take (or a value that
    :func:`~irtbox.ops.config_inputs.check_config_values` refuses), naming ``path`` (default
    ``cfg.filename``), the key path and the closest valid key."""
    _Checker(cfg, path or getattr(cfg, 'filename', None) or 'the config').run()


class _Checker:

    def __init__(self, cfg: Config, path: str):
        self.cfg, self.path = cfg, path

    def fail(self, where: str, message: str):
        raise ConfigError(f'{self.path}: {where}: {message}')

    def run(self) -> None:
        cfg = self.cfg
        imports = cfg.get('custom_imports')
        if imports:
            import_modules_from_strings(**imports)
        check_config_values(cfg, self.path)
        self.part(cfg.get('model'), 'model', (MODELS, ))
        hooks = cfg.get('default_hooks') or {}
        for name, hook in hooks.items():
            if isinstance(hook, dict) and 'type' not in hook and name in _DEFAULT_HOOK_TYPES:
                hook = {'type': _DEFAULT_HOOK_TYPES[name], **hook}
            self.part(hook, f'default_hooks.{name}', (HOOKS, ))
        self.part(cfg.get('custom_hooks'), 'custom_hooks', (HOOKS, ))
        for split in ('train', 'val', 'test'):
            self.dataloader(cfg.get(f'{split}_dataloader'), f'{split}_dataloader')
            self.loop(cfg.get(f'{split}_cfg'), split)
        for key in ('val_evaluator', 'test_evaluator'):
            self.registered(cfg.get(key), key, (METRICS, EVALUATOR))
            self.part(cfg.get(key), key, (METRICS, EVALUATOR))
        self.optim_wrapper(cfg.get('optim_wrapper'))
        self.part(cfg.get('param_scheduler'), 'param_scheduler', (PARAM_SCHEDULERS, ))
        # The visualizer, log processor and model wrapper are built with the runner, before
        # anything runs, and the build names a wrong argument: not checked here.

    # -- walking ---------------------------------------------------------------------------
    def part(self, node: Any, where: str, registries) -> None:
        """Check ``node`` (a ``dict(type=...)``, a plain dict or list of them, or a value)."""
        if registries == _SKIP:
            return
        if isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                self.part(item, f'{where}.{i}', registries)
            return
        if not isinstance(node, dict):
            return
        if 'type' in node:
            self.typed(node, where, registries)
        for key, value in node.items():
            if key in ('type', '_scope_'):
                continue
            self.part(value, f'{where}.{key}', _CHILD_REGISTRIES.get(key, registries))

    def registered(self, node: Any, where: str, registries) -> None:
        """Refuse a ``type`` no registry of ``registries`` (nor their parents) has, naming the
        closest registered one (a scope-prefixed name, ``scope.Type``, is left to the build)."""
        if isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                self.registered(item, f'{where}.{i}', registries)
            return
        kind = node.get('type') if isinstance(node, dict) else None
        if not isinstance(kind, str) or '.' in kind or _resolve(kind, registries) is not None:
            return
        names = set()
        for registry in registries:
            while registry is not None:
                names |= set(registry.module_dict)
                registry = registry.parent
        close = difflib.get_close_matches(kind, sorted(names), n=1, cutoff=0.6)
        self.fail(f'{where}.type', f'{kind!r} is not a registered metric or evaluator'
                  + (f'; did you mean {close[0]!r}?' if close else ''))

    def typed(self, node: dict, where: str, registries, accepted_extra: Iterable = ()) -> None:
        """Check the keys of ``node`` against the constructor of the class its ``type``
        names (and ``accepted_extra``)."""
        cls = _resolve(node['type'], registries)
        if cls is None:
            return  # not registered (yet): the build names it
        accepted = accepted_keys(cls, self.cfg)
        if accepted is None:
            return
        accepted |= set(accepted_extra)
        if PARAM_SCHEDULERS in registries:  # Runner.build_param_scheduler takes it out
            accepted.add('convert_to_iter_based')
        name = getattr(cls, '__name__', str(cls))
        for key in node:
            if key not in accepted and key not in ('type', '_scope_'):
                self.unknown(where, key, name, accepted)

    def unknown(self, where: str, key: str, name: str, accepted: Set[str]):
        valid = sorted(k for k in accepted if not k.startswith('_'))
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
        hint = f'; did you mean {close[0]!r}?' if close else '.'
        if not valid:
            takes = f'{name} takes no arguments'
        elif len(valid) <= 12:
            takes = f'{name} takes: {", ".join(valid)}'
        else:
            takes = f'{name} takes {len(valid)} arguments: {", ".join(valid[:12])}, ...'
        self.fail(f'{where}.{key}', f'{name} takes no argument {key!r}{hint} ({takes})')

    def dataloader(self, loader: Any, where: str) -> None:
        if not isinstance(loader, dict):
            return
        accepted = set(inspect.signature(DataLoader.__init__).parameters) | _DATALOADER_OWN
        for key in loader:
            if key not in accepted:
                self.unknown(where, key, 'the dataloader (torch DataLoader)', accepted - {'self'})
        self.part(loader, where, (DATASETS, ))  # its children by key: dataset, sampler, ...

    def loop(self, loop: Any, split: str) -> None:
        where = f'{split}_cfg'
        if not isinstance(loop, dict):
            return
        # No type: the loop MMEngine builds, a train loop chosen by ``by_epoch``, which it reads.
        train = 'EpochBasedTrainLoop' if loop.get('by_epoch') else 'IterBasedTrainLoop'
        kind = dict(train=train, val='ValLoop', test='TestLoop')[split]
        extra = ('by_epoch', ) if split == 'train' and 'type' not in loop else ()
        self.typed({'type': kind, **loop}, where, (LOOPS, ), accepted_extra=extra)

    def optim_wrapper(self, wrapper: Any) -> None:
        if not isinstance(wrapper, dict):
            return
        # The wrapper itself (its constructor takes some keys out first) is built when training
        # starts, before the first iteration, and that build names a wrong argument.
        for key, value in wrapper.items():
            if key != 'type':
                self.part(value, f'optim_wrapper.{key}',
                          _CHILD_REGISTRIES.get(key, (OPTIM_WRAPPERS, )))


def _resolve(kind: Any, registries) -> Optional[Callable]:
    """The class (or function) ``kind`` names in the first of ``registries`` that has it."""
    if callable(kind):
        return kind
    if not isinstance(kind, str):
        return None
    for registry in registries:
        try:
            found = registry.get(kind)
        except Exception:  # a scope not installed, a failed import: left to the build
            found = None
        if found is not None:
            return found
    return None


# -- what a constructor accepts -------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _params(fn) -> Tuple[Set[str], Optional[str]]:
    """(keyword-passable parameter names of ``fn``, the name of its ``**kwargs`` or None)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return set(), 'kwargs'
    names, var_kw = set(), None
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            names.add(p.name)
        elif p.kind == p.VAR_KEYWORD:
            var_kw = p.name
    names.discard('self')
    return names, var_kw


def accepted_keys(cls: Callable, cfg: Optional[Config] = None) -> Optional[Set[str]]:
    """The config keys ``cls`` accepts, read off its signature; None (not checked) when it
    takes ``**kwargs``, except ``CheckpointHook``'s, which go to ``save_checkpoint``."""
    if not inspect.isclass(cls):
        names, var_kw = _params(cls)
        return None if var_kw else names
    owner = next(c for c in cls.__mro__ if '__init__' in vars(c))
    if owner in (object, torch.nn.Module):
        return set()  # they take no keyword arguments
    names, var_kw = _params(owner.__init__)
    if var_kw is None:
        return names
    if cls.__name__ == 'CheckpointHook':
        extra = _save_checkpoint_keys(cfg)
        return None if extra is None else names | extra
    return None


def _save_checkpoint_keys(cfg) -> Optional[Set[str]]:
    """The keys MMEngine's CheckpointHook passes on to ``runner.save_checkpoint``: its
    arguments less those the hook gives itself."""
    name = (cfg or {}).get('runner_type') or 'IrtboxRunner'
    runner = _resolve(name, (RUNNERS, ))
    if runner is None:
        return None
    names, var_kw = _params(runner.save_checkpoint)
    if var_kw:
        return None
    return names - {'out_dir', 'filename', 'file_client_args', 'save_optimizer',
                    'save_param_scheduler', 'meta', 'by_epoch', 'backend_args'}

