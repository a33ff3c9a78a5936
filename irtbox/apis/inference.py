"""Build a retriever from a config (and a checkpoint) for use in Python code."""
from typing import Optional, Union

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from irtbox.registry import MODELS
from irtbox.utils.checkpoint import load_state_dict_file
from irtbox.utils.config import load_config


def init_model(config: Union[str, Config], checkpoint: Optional[str] = None,
               device: Union[str, torch.device] = 'cpu', cfg_options: Optional[dict] = None):
    """The retriever of ``config`` in eval mode, with ``checkpoint``'s weights when given.

    ``model(inputs, mode='tensor')`` then maps a normalised B x 3 x H x W batch to
    B x D L2-normalised embeddings (``model.data_preprocessor`` normalises raw
    uint8 batches). ``checkpoint`` may be a path or an http(s) URL; it is loaded
    with ``weights_only=True``. Every key of the checkpoint must match the model.
    """
    cfg = config if isinstance(config, Config) else load_config(config, cfg_options)
    if cfg.get('model') is None:
        raise KeyError(f'config {getattr(cfg, "filename", config)} has no "model" entry')
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'irtbox')):
        model = MODELS.build(cfg.model)
    if checkpoint is not None:
        state = load_state_dict_file(checkpoint)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise KeyError(f'checkpoint {checkpoint} does not match the model of the config: '
                           f'missing keys {missing[:10]}, unexpected keys {unexpected[:10]}')
    return model.to(device).eval()
