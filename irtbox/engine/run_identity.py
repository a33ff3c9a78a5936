"""What makes two trainings the same training, so that a work dir's checkpoints resume only the
run that wrote them.

Each checkpoint records :func:`config_identity` of its config (``meta.config_identity``): every
entry of ``model`` (architecture, necks, losses and their weights) and the training set's
``type`` and ``split``, flattened to ``key: text``. Paths (``data_root``, ``ann_file``, an
``init_cfg``'s ``checkpoint``) are left out, since data and weights move between machines;
the schedule, the optimizer's settings and the loader are left out too: a longer schedule or
another learning rate continues a run (the runner warns about a new learning rate and refuses
another optimizer type).
"""
from typing import Dict, List, Optional

__all__ = ['IDENTITY_KEY', 'config_identity', 'identity_differences']

#: Where a checkpoint's ``meta`` holds its config's identity.
IDENTITY_KEY = 'config_identity'
_PATH_KEYS = ('data_root', 'ann_file', 'checkpoint', 'cache_dir', 'data_prefix')


def _flatten(value, prefix: str, out: Dict[str, str]) -> None:
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            if str(key) not in _PATH_KEYS:
                _flatten(value[key], f'{prefix}.{key}', out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _flatten(item, f'{prefix}.{i}', out)
        if not value:
            out[prefix] = '[]'
    elif isinstance(value, type) or callable(value):
        out[prefix] = getattr(value, '__name__', repr(value))
    else:
        out[prefix] = repr(value)


def config_identity(cfg) -> Dict[str, str]:
    """``{'model.backbone.depth': '1', ..., 'train_dataloader.dataset.type': "'SOPDataset'"}``
    of a config (see the module's docstring for what is in and out)."""
    out: Dict[str, str] = {}
    _flatten(cfg.get('model') or {}, 'model', out)
    dataset = (cfg.get('train_dataloader') or {}).get('dataset') or {}
    if isinstance(dataset, dict):
        for key in ('type', 'split'):
            if key in dataset:
                _flatten(dataset[key], f'train_dataloader.dataset.{key}', out)
    return out


def identity_differences(saved: Optional[dict], now: Dict[str, str], limit: int = 3) -> List[str]:
    """Up to ``limit`` lines ``key: A in the checkpoint, B in this config`` (``(none)`` for an
    entry only one side has); empty when they are the same or ``saved`` is None (a
    checkpoint of an irtbox from before identities)."""
    if not isinstance(saved, dict):
        return []
    lines = []
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            lines.append(f'{key}: {saved.get(key, "(none)")} in the checkpoint, '
                         f'{now.get(key, "(none)")} in this config')
    if len(lines) > limit:
        lines = lines[:limit] + [f'... and {len(lines) - limit} more']
    return lines
