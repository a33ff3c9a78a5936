"""Every MMEngine internal irtbox relies on, where MMEngine has no public API: the ``_base_``
resolution, the checkpoint loaders by prefix, the runner's "loaded" flag, the train loop's
batch iterator, and the private methods of :data:`OVERRIDDEN`, which the mixins below route to
public names. In ``utils`` because ``utils.config`` and ``utils.checkpoint`` need two of them.
tests/test_utils/test_mmengine_compat.py checks each against the installed MMEngine."""
import contextlib
import copy
import os
import threading
from typing import Callable

from mmengine.config import Config

__all__ = ['OVERRIDDEN', 'RunnerPrivates', 'CheckpointHookPrivates', 'base_path_resolver',
           'checkpoint_loaders_restored', 'configs_parsed_once', 'has_loaded',
           'save_checkpoint_now', 'set_has_loaded', 'wrap_train_iterator']

#: (MMEngine class path, private method, its parameters) that irtbox overrides or calls.
OVERRIDDEN = (
    ('mmengine.runner.Runner', '_init_model_weights', ('self',)),
    ('mmengine.runner.Runner', '_maybe_compile', ('self', 'target')),
    ('mmengine.runner.Runner', '_log_env', ('self', 'env_cfg')),
    ('mmengine.config.Config', '_file2dict',
     ('filename', 'use_predefined_variables', 'use_environment_variables', 'lazy_import')),
    ('mmengine.hooks.CheckpointHook', '_save_checkpoint', ('self', 'runner')),
    ('mmengine.hooks.CheckpointHook', '_save_checkpoint_with_step',
     ('self', 'runner', 'step', 'meta')),
    ('mmengine.hooks.CheckpointHook', '_save_best_checkpoint', ('self', 'runner', 'metrics')),
)

_CFG_PATH_LOCK = threading.RLock()


@contextlib.contextmanager
def base_path_resolver(wrap: Callable[[Callable], Callable]):
    """Within the block (one thread at a time), ``Config.fromfile`` resolves each ``_base_``
    entry with ``wrap(Config._get_cfg_path)``."""
    with _CFG_PATH_LOCK:
        original = Config.__dict__['_get_cfg_path']
        resolve = wrap(original.__func__)
        resolve.irtbox = True
        Config._get_cfg_path = staticmethod(resolve)
        try:
            yield
        finally:
            Config._get_cfg_path = original


@contextlib.contextmanager
def configs_parsed_once(parsed: dict = None):
    """Within the block (one thread at a time), MMEngine's parse of a config file
    (``Config._file2dict``, which ``Config.fromfile`` runs for a config and again for each of
    its bases, for every config that names them: ~1,700 parses for the ~220 shipped configs)
    runs once per file (as named, and its real path), its modification time and arguments;
    each call gets its own copy. ``parsed``: the parses kept, to share them between blocks."""
    parsed = {} if parsed is None else parsed
    with _CFG_PATH_LOCK:
        original = Config.__dict__['_file2dict']

        def once(filename, *args, **kwargs):
            path = os.path.realpath(filename)
            key = (filename, path, os.stat(path).st_mtime_ns, args, tuple(sorted(kwargs.items())))
            if key not in parsed:
                parsed[key] = original.__func__(filename, *args, **kwargs)
            return copy.deepcopy(parsed[key])

        Config._file2dict = staticmethod(once)
        try:
            yield
        finally:
            Config._file2dict = original


@contextlib.contextmanager
def checkpoint_loaders_restored():
    """MMEngine's ``CheckpointLoader`` schemes back as they were, whatever the block registers."""
    from mmengine.runner.checkpoint import CheckpointLoader  # torch: not for utils.config

    # register_scheme writes into the current dict, then replaces it by a sorted copy.
    saved = CheckpointLoader._schemes.copy()
    try:
        yield
    finally:
        CheckpointLoader._schemes = saved


def has_loaded(runner) -> bool:
    """Whether ``runner`` loaded or resumed a checkpoint already (its ``load_or_resume``
    then loads nothing)."""
    return bool(runner._has_loaded)


def set_has_loaded(runner) -> None:
    runner._has_loaded = True


def wrap_train_iterator(loop, wrap: Callable, *args) -> None:
    """Replace an iteration-based train loop's batch iterator by ``wrap(iterator, *args)``."""
    if hasattr(loop, 'dataloader_iterator'):
        loop.dataloader_iterator = wrap(loop.dataloader_iterator, *args)


class RunnerPrivates:
    """Mixed into a ``Runner`` subclass before ``Runner``: MMEngine's private
    ``_init_model_weights``, ``_maybe_compile`` and ``_log_env`` call the public
    :meth:`init_model_weights`, :meth:`compile_model` and :meth:`log_env`."""

    def _init_model_weights(self) -> None:
        self.init_model_weights()

    def init_model_weights(self) -> None:
        """MMEngine's: each module's ``init_weights``, then rank 0's weights to all ranks."""
        super()._init_model_weights()

    def _maybe_compile(self, target: str) -> None:
        self.compile_model(target)

    def compile_model(self, target: str) -> None:
        """MMEngine's: ``torch.compile`` of the model's method ``target`` (``'train_step'``)
        when the config says ``compile``."""
        super()._maybe_compile(target)

    def _log_env(self, env_cfg: dict) -> None:
        self.log_env(env_cfg)

    def log_env(self, env_cfg: dict) -> None:
        """MMEngine's: the environment and the config, logged at INFO."""
        super()._log_env(env_cfg)


class CheckpointHookPrivates:
    """Mixed into a ``CheckpointHook`` subclass before MMEngine's: its private save steps call
    the public :meth:`save_with_step` and :meth:`save_best_checkpoint`."""

    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        self.save_with_step(runner, step, meta)

    def save_with_step(self, runner, step, meta) -> None:
        super()._save_checkpoint_with_step(runner, step, meta)

    def _save_best_checkpoint(self, runner, metrics) -> None:
        self.save_best_checkpoint(runner, metrics)

    def save_best_checkpoint(self, runner, metrics) -> None:
        super()._save_best_checkpoint(runner, metrics)


def save_checkpoint_now(hook, runner) -> None:
    """Have a ``CheckpointHook`` save the checkpoint of the iteration just done, as at its
    interval (``last_checkpoint``, ``max_keep_ckpts``)."""
    hook._save_checkpoint(runner)
