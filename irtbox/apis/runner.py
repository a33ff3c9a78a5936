"""What ``tools/train.py`` and ``tools/test.py`` share: a config with the work dir and the
launcher set, a checkpoint argument checked, and the runner the config asks for."""
import os.path as osp
from typing import Optional

from mmengine.config import Config

from irtbox.registry import RUNNERS
from irtbox.utils.config import ConfigError, load_config

__all__ = ['DEFAULT_RUNNER', 'build_runner', 'check_checkpoint', 'load_run_config']

#: The runner built when a config sets no ``runner_type``.
DEFAULT_RUNNER = 'IrtboxRunner'


def load_run_config(path: str, cfg_options: Optional[dict] = None,
                    work_dir: Optional[str] = None, launcher: str = 'none') -> Config:
    """The config at ``path`` with ``cfg_options`` merged (:func:`load_config`), ``launcher``
    set, and ``work_dir``: the one given, else the config's, else
    ``./work_dirs/<config name>``. With a launcher and no CUDA, the gloo backend."""
    from irtbox.utils.dist import adapt_cfg_to_device
    cfg = load_config(path, cfg_options)
    cfg.launcher = launcher
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(path))[0])
    if launcher != 'none':
        adapt_cfg_to_device(cfg)
    return cfg


def check_checkpoint(path: str) -> str:
    """``path`` when it is a file or a URL, else ``FileNotFoundError``."""
    if not osp.isfile(path) and not path.startswith(('http://', 'https://')):
        raise FileNotFoundError(f'checkpoint not found: {path}')
    return path


def build_runner(cfg: Config):
    """The runner of ``cfg``: the registered runner named by ``cfg.runner_type`` (default
    ``IrtboxRunner``) built with its ``from_cfg``, after the distributed set-up of
    ``cfg.launcher`` and the checkpoint classes ``torch.load`` may unpickle."""
    import irtbox.engine  # noqa: F401  (registers IrtboxRunner)
    from irtbox.utils import register_safe_globals
    from irtbox.utils.dist import init_distributed
    name = cfg.get('runner_type') or DEFAULT_RUNNER
    runner_cls = RUNNERS.get(name)
    if runner_cls is None:
        raise ConfigError(f'{cfg.filename}: runner_type {name!r} is not a registered runner '
                          f"(irtbox's: {sorted(RUNNERS.module_dict)}; or MMEngine's 'Runner')")
    register_safe_globals()
    if cfg.get('launcher', 'none') != 'none':
        init_distributed(cfg.launcher)
    return runner_cls.from_cfg(cfg)
