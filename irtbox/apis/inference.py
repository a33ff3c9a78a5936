"""Build a retriever from a config (and a checkpoint) for use in Python code."""
import copy
from typing import Optional, Union

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from irtbox.models.input_spec import resolve_input_spec
from irtbox.registry import MODELS
from irtbox.utils.checkpoint import (TRAINING_ONLY_PREFIXES, CheckpointMismatchError,
                                     download_checkpoint, load_model_weights)
from irtbox.utils.config import load_config

from .model_zoo import resolve_config

# The weight loading lives in irtbox.utils.checkpoint (the runner uses it too); it is part
# of this API.
__all__ = ['CheckpointMismatchError', 'TRAINING_ONLY_PREFIXES', 'init_model',
           'load_model_weights', 'without_pretrained_backbone']


def without_pretrained_backbone(cfg: Config) -> Config:
    """A copy of ``cfg`` whose backbone loads no weights of its own (no timm
    ``pretrained`` download, no backbone ``checkpoint`` file): for when a whole-model
    checkpoint supplies them, or random weights are wanted."""
    cfg = copy.deepcopy(cfg)
    backbone = cfg.model.get('backbone')
    if isinstance(backbone, dict):
        if backbone.get('pretrained'):
            backbone['pretrained'] = False
        backbone.pop('checkpoint', None)
        init_cfg = backbone.get('init_cfg')
        if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
            backbone['init_cfg'] = None
    return cfg


def init_model(config: Union[str, Config], checkpoint: Optional[str] = None,
               device: Union[str, torch.device] = 'cpu', cfg_options: Optional[dict] = None):
    """The retriever of ``config`` in eval mode, with ``checkpoint``'s weights when given.

    ``model(inputs, mode='tensor')`` then maps a normalised B x 3 x H x W batch to
    B x D L2-normalised embeddings (``model.data_preprocessor`` normalises raw
    uint8 batches). ``checkpoint`` may be a path or an http(s) URL, a ``.pth``
    (loaded with ``weights_only=True``) or a ``.safetensors`` file; every key must
    match the model (see :func:`load_model_weights`). With a checkpoint the backbone
    is built without its own pretrained weights (the checkpoint has them), so this
    works offline. The model keeps its config as ``model.cfg``, the local checkpoint
    file as ``model.checkpoint``, and what it takes as input, resolved from its data
    preprocessor and test pipeline, as ``model.input_spec``
    (:class:`~irtbox.models.input_spec.InputSpec`).
    """
    cfg = config if isinstance(config, Config) else load_config(
        resolve_config(config), cfg_options)
    if cfg.get('model') is None:
        raise KeyError(f'config {getattr(cfg, "filename", config)} has no "model" entry')
    if checkpoint is not None:
        cfg = without_pretrained_backbone(cfg)
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', 'irtbox')):
        model = MODELS.build(cfg.model)
    if checkpoint is not None:
        if checkpoint.startswith(('http://', 'https://')):
            checkpoint = download_checkpoint(checkpoint)
        load_model_weights(model, checkpoint)
    # What extraction, search indexes and export need to know of the model's origin.
    model.cfg, model.checkpoint = cfg, checkpoint
    model.input_spec = resolve_input_spec(model, cfg)
    return model.to(device).eval()
