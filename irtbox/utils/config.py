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


def _size_hw(size, key: str, where: str):
    """mmcv sizes are an int or (w, h); returned as (h, w)."""
    if isinstance(size, int):
        return size, size
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(s, int) for s in size):
        return int(size[1]), int(size[0])
    raise ValueError(f'{where}: {key}={size!r}; expected an int or (w, h)')


def eval_pipeline(cfg: Config) -> list:
    """The transforms of the config's (first) test dataset, through dataset wrappers."""
    loader = cfg.get('test_dataloader')
    if isinstance(loader, (list, tuple)):
        loader = loader[0] if loader else None
    dataset = (loader or {}).get('dataset') or {}
    while 'pipeline' not in dataset and isinstance(dataset.get('dataset'), dict):
        dataset = dataset['dataset']
    return list(dataset.get('pipeline') or [])


def eval_input_size(cfg: Config):
    """(H, W) of the images the config's test pipeline gives the model.

    The last size-setting transform decides: ``CenterCrop(crop_size)``, or ``Resize(scale)``
    (with ``keep_ratio=True`` the size of a square image, the largest the pipeline makes).
    Raises ValueError when the pipeline sets no size.
    """
    where = f'{getattr(cfg, "filename", None) or "config"}: test pipeline'
    size = None
    for transform in eval_pipeline(cfg):
        kind = transform.get('type')
        if kind == 'CenterCrop' and 'crop_size' in transform:
            size = _size_hw(transform['crop_size'], 'crop_size', f'{where}, {kind}')
        elif kind == 'Resize' and transform.get('scale') is not None:
            size = _size_hw(transform['scale'], 'scale', f'{where}, {kind}')
    if size is None:
        raise ValueError(f'{where} has no Resize or CenterCrop that fixes the image size; '
                         'give the size explicitly')
    return size
