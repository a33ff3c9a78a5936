"""Every MMEngine internal irtbox relies on, for the needs MMEngine has no public API for
(the ``_base_`` resolution, the checkpoint loaders by prefix, two runner attributes, the
private methods of :data:`OVERRIDDEN`). tests/test_utils/test_mmengine_compat.py checks each
against the installed MMEngine, so a release that changes one fails there, not in a training.
Importing it imports ``mmengine.config`` only (no torch).
"""
import contextlib
from typing import Callable

from mmengine.config import Config

__all__ = ['OVERRIDDEN', 'checkpoint_loaders_restored', 'has_loaded', 'set_has_loaded',
           'set_experiment_name', 'wrap_base_path']

#: (MMEngine class path, private method, its parameters) that irtbox overrides or calls.
OVERRIDDEN = (
    ('mmengine.runner.Runner', '_init_model_weights', ('self',)),
    ('mmengine.hooks.CheckpointHook', '_save_checkpoint', ('self', 'runner')),
    ('mmengine.hooks.CheckpointHook', '_save_checkpoint_with_step',
     ('self', 'runner', 'step', 'meta')),
    ('mmengine.hooks.CheckpointHook', '_save_best_checkpoint', ('self', 'runner', 'metrics')),
)


def wrap_base_path(wrap: Callable[[Callable], Callable]) -> None:
    """Replace ``Config._get_cfg_path(cfg_path, filename) -> (path, scope)`` by
    ``wrap(original)``, once per process however often it is called (``wrap``'s result is
    marked)."""
    if getattr(Config._get_cfg_path, 'irtbox', False):
        return
    resolve = wrap(Config._get_cfg_path)
    resolve.irtbox = True
    Config._get_cfg_path = staticmethod(resolve)


@contextlib.contextmanager
def checkpoint_loaders_restored():
    """MMEngine's ``CheckpointLoader`` schemes (prefix -> loader, in match order) as they
    were before the block, whatever the block registers."""
    from mmengine.runner.checkpoint import CheckpointLoader

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


def set_experiment_name(runner, name: str) -> None:
    """Name ``runner``'s experiment (its logger, visualizer and log folder) ``name``; only
    before ``build_logger``."""
    runner._experiment_name = name
