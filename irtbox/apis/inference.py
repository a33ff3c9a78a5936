"""Build a retriever from a config (and a checkpoint) for use in Python code."""
import copy
from typing import Dict, Optional, Union

import torch
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import DefaultScope

from irtbox.registry import MODELS
from irtbox.utils.checkpoint import download_checkpoint, load_state_dict_file
from irtbox.utils.config import load_config

# Parts of a retriever used only for training (the losses' classifiers and memories, the
# momentum encoder): a published inference checkpoint may leave them out.
TRAINING_ONLY_PREFIXES = ('head.', 'momentum_encoder.')


class CheckpointMismatchError(ValueError):
    """A checkpoint whose keys or shapes do not match the model built from the config."""


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


def load_model_weights(model: torch.nn.Module, checkpoint: Union[str, Dict[str, torch.Tensor]],
                       source: Optional[str] = None, training_parts: str = 'optional') -> None:
    """Load ``checkpoint`` (a path or URL, ``.pth`` or ``.safetensors``, or a state dict
    read from ``source``) into ``model``.

    Every key and shape must match, except for the training-only parts
    (:data:`TRAINING_ONLY_PREFIXES`), as ``training_parts`` says: ``'optional'`` (default)
    they may be absent, as in the inference checkpoints ``tools/misc/publish_model.py``
    writes; ``'required'`` they must match too (resuming training); ``'ignored'`` absent
    or of another shape they are left as built (evaluation, which does not use them).
    """
    if training_parts not in ('optional', 'required', 'ignored'):
        raise ValueError(f"training_parts={training_parts!r}; expected 'optional', 'required' "
                         "or 'ignored'")
    if isinstance(checkpoint, str):
        state, source = load_state_dict_file(checkpoint), checkpoint
    else:
        state, source = checkpoint, source or 'the state dict'
    own = model.state_dict()
    mismatched = [k for k, v in state.items() if k in own and tuple(v.shape) != tuple(own[k].shape)]
    missing, unexpected = model.load_state_dict(
        {k: v for k, v in state.items() if k not in mismatched}, strict=False)
    skipped = []
    if training_parts != 'required':
        skipped = [k for k in missing if k.startswith(TRAINING_ONLY_PREFIXES)]
        if training_parts == 'ignored':
            skipped += [k for k in mismatched if k.startswith(TRAINING_ONLY_PREFIXES)]
    missing = [k for k in missing if k not in skipped]
    mismatched = [f'{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(own[k].shape)}'
                  for k in mismatched if k not in skipped]
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(
            f'checkpoint {source} does not match the model of the config: missing keys '
            f'{missing[:10]} ({len(missing)} in all), unexpected keys {unexpected[:10]} '
            f'({len(unexpected)}), shape mismatches {mismatched[:10]} ({len(mismatched)})')
    if skipped:
        print_log(f'{source}: training-only weights absent or of another shape, not loaded '
                  f'({len(skipped)} keys under {", ".join(TRAINING_ONLY_PREFIXES)}); fine for '
                  'inference, not for resuming training', logger='current')


def init_model(config: Union[str, Config], checkpoint: Optional[str] = None,
               device: Union[str, torch.device] = 'cpu', cfg_options: Optional[dict] = None):
    """The retriever of ``config`` in eval mode, with ``checkpoint``'s weights when given.

    ``model(inputs, mode='tensor')`` then maps a normalised B x 3 x H x W batch to
    B x D L2-normalised embeddings (``model.data_preprocessor`` normalises raw
    uint8 batches). ``checkpoint`` may be a path or an http(s) URL, a ``.pth``
    (loaded with ``weights_only=True``) or a ``.safetensors`` file; every key must
    match the model (see :func:`load_model_weights`). With a checkpoint the backbone
    is built without its own pretrained weights (the checkpoint has them), so this
    works offline. The model keeps its config as ``model.cfg`` and the local checkpoint
    file as ``model.checkpoint``.
    """
    cfg = config if isinstance(config, Config) else load_config(config, cfg_options)
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
    return model.to(device).eval()
