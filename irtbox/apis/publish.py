"""Turn a training checkpoint into a zoo release: weights only, hashed, in a local zoo folder.

``publish_checkpoint`` keeps the model's weights (no optimizer, scheduler or message-hub
state; without the training-only losses and momentum encoder unless asked), checks them
against the model the config builds, measures the embedding dimension with one forward
pass, and writes into ``out_dir``:

- ``<name>-<first 8 hex of sha256>.safetensors`` (or ``.pth``), renamed into place only
  once complete;
- ``<name>.py``: the full config (``_base_`` files merged), so the folder stands alone;
- ``model-index.yml``: the folder's zoo index, with this model's entry added or replaced.
  Point ``IRTBOX_MODEL_INDEX`` at it and ``get_model(name)`` finds the model."""
import datetime
import json
import os
import os.path as osp
import re
from typing import Dict, Optional

import torch
import yaml
from mmengine.config import Config
from mmengine.logging import print_log

from irtbox.utils.checkpoint import extract_state_dict, safe_torch_load
from irtbox.utils.config import ConfigError, config_from_text, load_config
from irtbox.utils.download import sha256sum
from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write, atomic_write_text, rename_into_place
from .identity import embedding_dim
from .inference import (TRAINING_ONLY_PREFIXES, init_model, load_model_weights,
                        without_pretrained_backbone)
from .model_zoo import resolve_config

__all__ = ['checkpoint_config', 'weights_block', 'publish_checkpoint']

FORMATS = ('safetensors', 'pth')
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._+-]*$')


def checkpoint_config(checkpoint: dict, config: Optional[str], source: str) -> Config:
    """The config given, else the one MMEngine stored in the checkpoint's ``meta``."""
    if config is not None:
        return load_config(resolve_config(config))
    text = (checkpoint.get('meta') or {}).get('cfg') if isinstance(checkpoint, dict) else None
    if not text:
        raise ArgumentError(f'{source} carries no config (meta.cfg); pass the config it was '
                            'trained with', 'config')
    # Read as data, not run: a checkpoint from elsewhere carries any text it likes.
    try:
        cfg = config_from_text(text, f'{source}: meta.cfg')
    except ConfigError as err:
        raise ArgumentError(f'{err}; pass the config it was trained with', 'config') from None
    cfg.setdefault('default_scope', 'irtbox')
    return cfg


def weights_block(url: str, sha256: str, size: int, dim: int, indent: int = 4) -> str:
    """The metafile ``Weights:`` mapping of a release, as YAML text."""
    pad = ' ' * indent
    return (f'{pad}Weights:\n{pad}  URL: {url}\n{pad}  SHA256: {sha256}\n{pad}  Size: {size}\n'
            f'{pad}  Embedding Dim: {dim}\n')


def _update_index(index_path: str, entry: dict) -> None:
    data = {}
    if osp.isfile(index_path):
        with open(index_path) as f:
            data = yaml.safe_load(f) or {}
        if not isinstance(data, dict):
            raise ValueError(f'{index_path} is not a model index (expected a mapping)')
    models = [m for m in data.get('Models') or [] if m.get('Name') != entry['Name']]
    data['Models'] = sorted(models + [entry], key=lambda m: m['Name'])

    atomic_write_text(index_path,
                      '# A local irtbox model zoo, written by irtbox.apis.publish_checkpoint.\n'
                      '# Use it with IRTBOX_MODEL_INDEX=<this file> or get_model(..., index=...).\n'
                      + yaml.safe_dump(data, sort_keys=False))


def publish_checkpoint(checkpoint: str, out_dir: str, name: Optional[str] = None,
                       fmt: str = 'safetensors', config: Optional[str] = None,
                       url_prefix: Optional[str] = None,
                       keep_training_state: bool = False) -> Dict:
    """Publish ``checkpoint`` into the zoo folder ``out_dir`` (see the module docstring).

    Args:
        checkpoint: an MMEngine checkpoint or a state dict file.
        name: default the config's file name, else the checkpoint's.
        fmt: ``'safetensors'`` (no pickle) or ``'pth'`` (``{'state_dict': ...}``).
        config: default the one stored in the checkpoint.
        url_prefix: where the folder will be served; the index entry then names
            ``<url_prefix><file>``. Default: the file name, relative to the index.
        keep_training_state: keep the losses' state and the momentum encoder (to fine-tune).

    Returns a dict with ``path``, ``name``, ``sha256``, ``size``, ``embedding_dim``,
    ``url``, ``index`` (the index file) and ``weights_block`` (YAML for a metafile).
    """
    if fmt not in FORMATS:
        raise ValueError(f'publish: format must be one of {FORMATS}, got {fmt!r}')
    raw = safe_torch_load(checkpoint)
    cfg = checkpoint_config(raw, config, checkpoint)
    name = name or osp.splitext(osp.basename(config or checkpoint))[0]
    if not _NAME.match(name):
        raise ValueError(f'publish: name {name!r} must be letters, digits and ._+- only')
    state = extract_state_dict(raw)
    dropped = [k for k in state if k.startswith(TRAINING_ONLY_PREFIXES)]
    if not keep_training_state:
        state = {k: v for k, v in state.items() if not k.startswith(TRAINING_ONLY_PREFIXES)}

    model = init_model(without_pretrained_backbone(cfg))
    load_model_weights(model, state, source=checkpoint)
    dim = embedding_dim(model)

    os.makedirs(out_dir, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    staging = osp.join(out_dir, f'.{name}.staging.{fmt}')
    if fmt == 'safetensors':
        from safetensors.torch import save_file
        # One metadata key: safetensors writes several in a random order, and the same
        # weights must give the same file (and name) every time.
        meta = {'irtbox': json.dumps({'name': name, 'embedding_dim': dim}, sort_keys=True)}
        atomic_write(staging, lambda tmp: save_file(
            {k: v.clone() for k, v in tensors.items()}, tmp, metadata=meta))
    else:
        atomic_write(staging, lambda tmp: torch.save(
            {'state_dict': tensors, 'meta': {'name': name, 'embedding_dim': dim}}, tmp))
    digest = sha256sum(staging)
    filename = f'{name}-{digest[:8]}.{fmt}'
    path = osp.join(out_dir, filename)
    rename_into_place(staging, path)
    size = osp.getsize(path)

    config_file = osp.join(out_dir, f'{name}.py')
    atomic_write(config_file, lambda tmp: cfg.dump(tmp))
    url = f'{url_prefix.rstrip("/")}/{filename}' if url_prefix else filename
    entry = {'Name': name, 'Config': osp.basename(config_file),
             'Metadata': {'Source Checkpoint': osp.basename(checkpoint),
                          'Published': datetime.date.today().isoformat(),
                          'Training State': 'kept' if keep_training_state else 'removed'},
             'Weights': {'URL': url, 'SHA256': digest, 'Size': size, 'Embedding Dim': dim}}
    index = osp.join(out_dir, 'model-index.yml')
    _update_index(index, entry)
    if dropped and not keep_training_state:
        print_log(f'publish: left out {len(dropped)} training-only tensors '
                  f'({", ".join(TRAINING_ONLY_PREFIXES)})', logger='current')
    return dict(path=path, name=name, sha256=digest, size=size, embedding_dim=dim, url=url,
                index=index, config=config_file,
                weights_block=weights_block(url_prefix and url or f'<URL_PREFIX>/{filename}',
                                            digest, size, dim))
