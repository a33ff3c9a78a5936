"""Loading configs with errors that name the file and the entry at fault."""
import os.path as osp

from mmengine.config import Config, DictAction  # noqa: F401  (DictAction re-exported for tools)


def load_config(path: str, cfg_options: dict = None) -> Config:
    """``Config.fromfile`` plus ``--cfg-options``, with clear errors."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'config file not found: {path}')
    try:
        cfg = Config.fromfile(path)
    except Exception as err:  # re-raised naming the config file
        raise type(err)(f'could not load config {path}: {err}') from err
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.setdefault('default_scope', 'irtbox')
    return cfg
