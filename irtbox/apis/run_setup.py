"""What training and testing share: a config with the work dir and the
launcher set, a checkpoint argument checked, and the runner the config asks for."""
import os.path as osp
from typing import Optional

import torch
from mmengine.config import Config

import irtbox.engine  # noqa: F401  (registers IrtboxRunner)
from irtbox.engine.hooks.dataset_counts import DatasetCountCheckHook
from irtbox.registry import RUNNERS, type_name
from irtbox.utils.checkpoint import register_safe_globals
from irtbox.utils.checks import check_checkpoint  # noqa: F401  (its home before: the check is torch-free now)
from irtbox.utils.config import ConfigError, load_config
from irtbox.utils.dist import adapt_cfg_to_device, init_distributed

from .model_zoo import resolve_config

__all__ = ['DEFAULT_RUNNER', 'build_runner', 'check_checkpoint', 'dist_cfg_of', 'load_run_config']

#: The runner built when a config sets no ``runner_type``.
DEFAULT_RUNNER = 'IrtboxRunner'
_LOADER_KEYS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def load_run_config(path: str, cfg_options: Optional[dict] = None,
                    work_dir: Optional[str] = None, launcher: str = 'none') -> Config:
    """The config at ``path`` with ``cfg_options``, ``launcher`` and ``work_dir`` (default
    the config's, else ``./work_dirs/<config name>``); with CUDA, the loaders' defaults of
    :func:`_default_loader_options`."""
    path = resolve_config(path)
    cfg = load_config(path, cfg_options)
    cfg.launcher = launcher
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(path))[0])
    if torch.cuda.is_available():
        _default_loader_options(cfg)
    return cfg


def _default_loader_options(cfg: Config) -> None:
    """``pin_memory=True``, and ``persistent_workers=True`` where ``num_workers > 0``, in the
    dataloaders that do not set them (asynchronous copies to the GPU; workers not restarted
    each epoch). A train loader with a ``TupleMiningHook`` keeps non-persistent workers:
    they must restart to see each epoch's new tuples."""
    mines = any(type_name(hook) == 'TupleMiningHook' for hook in cfg.get('custom_hooks') or [])
    for key in _LOADER_KEYS:
        persistent = not (key == 'train_dataloader' and mines)
        loaders = cfg.get(key)
        for loader in loaders if isinstance(loaders, (list, tuple)) else [loaders]:
            if not isinstance(loader, dict):
                continue  # None: the config has no such loop
            loader.setdefault('pin_memory', True)
            if persistent and loader.get('num_workers', 0) > 0:
                loader.setdefault('persistent_workers', True)


def build_runner(cfg: Config):
    """The runner ``cfg.runner_type`` (default ``IrtboxRunner``) built with its ``from_cfg``,
    after the distributed set-up of ``cfg.launcher``. It gets a ``DatasetCountCheckHook``
    unless ``cfg.check_dataset_counts`` is False."""
    name = cfg.get('runner_type') or DEFAULT_RUNNER
    runner_cls = RUNNERS.get(name)
    if runner_cls is None:
        raise ConfigError(f'{cfg.filename}: runner_type {name!r} is not a registered runner '
                          f"(irtbox's: {sorted(RUNNERS.module_dict)}; or MMEngine's 'Runner')")
    register_safe_globals()
    if cfg.get('launcher', 'none') != 'none':
        init_distributed(cfg.launcher, **dist_cfg_of(cfg))
    runner = runner_cls.from_cfg(cfg)
    if cfg.get('check_dataset_counts', True):
        runner.register_hook(DatasetCountCheckHook())
    return runner


def dist_cfg_of(cfg: Config) -> dict:
    """``cfg.env_cfg.dist_cfg`` as a plain dict, with the gloo backend without CUDA."""
    adapt_cfg_to_device(cfg)
    return dict((cfg.get('env_cfg') or {}).get('dist_cfg') or {})
