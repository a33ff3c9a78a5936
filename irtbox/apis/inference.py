"""Build a retriever from a config (and a checkpoint) for use in Python code."""
import copy
import os
import os.path as osp
from typing import Optional, Sequence, Union

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from irtbox.engine.optim_wrappers import bf16_inference
from irtbox.models.backbones import PretrainedWeightsUnavailable
from irtbox.models.input_spec import resolve_input_spec
from irtbox.registry import MODELS
from irtbox.utils.checkpoint import (TRAINING_ONLY_PREFIXES, CheckpointMismatchError,
                                     download_checkpoint, load_model_weights)
from irtbox.utils.config import load_config
from irtbox.utils.dist import resolve_device
from irtbox.utils.download import ChecksumError, download

from .identity import embedding_dim
from .model_zoo import (ModelNotReleasedError, ZooEntry, ZooEntryMismatchError, get_entry,
                        resolve_config)

# The weight loading lives in irtbox.utils.checkpoint (the runner uses it too); it is part
# of this API.
__all__ = ['CheckpointMismatchError', 'TRAINING_ONLY_PREFIXES', 'init_model', 'get_model',
           'load_model_weights', 'without_pretrained_backbone']


def without_pretrained_backbone(cfg: Config) -> Config:
    """A copy of ``cfg`` whose backbone loads no weights of its own: for when a whole-model
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
               device: Union[str, torch.device, None] = None, cfg_options: Optional[dict] = None):
    """The retriever of ``config`` in eval mode, with ``checkpoint``'s weights when given.
    ``model(inputs, mode='tensor')`` then maps a normalised B x 3 x H x W batch to B x D
    L2-normalised embeddings (``model.data_preprocessor`` normalises raw uint8 batches).
    ``checkpoint``: a path or http(s) URL, ``.pth`` or ``.safetensors``; every key must match the
    model. With a checkpoint the backbone loads no pretrained weights of its own, so this works
    offline. The model keeps ``model.cfg``, ``model.checkpoint`` (the local file) and
    ``model.input_spec`` (:class:`~irtbox.models.input_spec.InputSpec`) and
    ``model.bf16_inference`` (:func:`~irtbox.engine.optim_wrappers.bf16_inference`). ``device``:
    :func:`~irtbox.utils.dist.resolve_device`."""
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
    if hasattr(model, 'bf16_inference'):  # as the runner's model
        model.bf16_inference = bf16_inference(cfg)
    return model.to(resolve_device(device)).eval()


def _not_released(entry: ZooEntry) -> ModelNotReleasedError:
    config = osp.relpath(entry.config) if entry.config.startswith(os.getcwd()) else entry.config
    return ModelNotReleasedError(
        f'{entry.name}: no weights are released for this model yet ("Weights: null" in '
        f'{entry.metafile}). Train it from its config {config}, then load your '
        f"checkpoint with get_model({entry.name!r}, pretrained='work_dirs/.../iter_N.pth'); "
        'pretrained=False builds the architecture with random weights.')


def _load_timm_pretrained(entry: ZooEntry, cfg: Config, device):
    try:
        return init_model(cfg, device=device)
    except PretrainedWeightsUnavailable as err:  # names the weights, the cache, the ways out
        raise PretrainedWeightsUnavailable(
            f'{entry.name} (timm weights {entry.weights["pretrained"]}): {err}') from err
    except Exception as err:  # timm's download or hub lookup failed: say which weights
        raise RuntimeError(
            f'{entry.name}: could not load timm\'s pretrained weights '
            f'{entry.weights["pretrained"]} (from the Hugging Face hub, or its cache under '
            f'$HF_HOME when HF_HUB_OFFLINE=1): {type(err).__name__}: {err}') from err


def get_model(name: str, pretrained: Union[bool, str] = True,
              device: Union[str, torch.device, None] = None,
              index: Union[str, Sequence[str], None] = None,
              cfg_options: Optional[dict] = None, progress: bool = True):
    """The zoo's model ``name`` in eval mode, ready for ``model(inputs, mode='tensor')``.

    Args:
        pretrained: True: the entry's weights (downloaded once into ``$IRTBOX_HOME``,
            sha256-verified); a path or URL: those weights; False: random weights.
        index: extra index file(s) (see :func:`list_models`).

    The returned model carries ``model.cfg`` (its config) and ``model.zoo_entry``.
    """
    entry = get_entry(name, index)
    if not osp.isfile(entry.config):
        raise FileNotFoundError(f'{entry.name}: its config {entry.config} does not exist '
                                f'(entry in {entry.metafile})')
    cfg = load_config(entry.config, cfg_options)
    if pretrained is True and entry.weights is None:
        raise _not_released(entry)
    if pretrained is True and entry.status == 'timm':
        model = _load_timm_pretrained(entry, cfg, device)
    elif pretrained is False:
        model = init_model(without_pretrained_backbone(cfg), device=device)
    else:
        if pretrained is True:
            path = download(entry.weights['url'], entry.weights['sha256'], progress=progress)
            _check_size(entry, path)
        elif isinstance(pretrained, str):
            path = download(pretrained, progress=progress)
        else:
            raise TypeError(f'get_model: pretrained must be True, False or a path/URL, got '
                            f'{pretrained!r}')
        model = init_model(cfg, path, device=device)
        if pretrained is True:
            _check_embedding_dim(entry, model)
    model.zoo_entry = entry
    return model


def _check_size(entry: ZooEntry, path: str) -> None:
    """The released file has the entry's ``Size``: refused as a sha256 mismatch is."""
    expected = entry.weights.get('size')
    size = osp.getsize(path)
    if expected is not None and size != expected:
        raise ChecksumError(
            f'size mismatch for {entry.weights["url"]}: the zoo entry {entry.name!r} '
            f'({entry.metafile}) says Size {expected} bytes, the file {path} has {size}; '
            'the file was left as it is')


def _check_embedding_dim(entry: ZooEntry, model) -> None:
    """The model built from the entry gives embeddings of the entry's ``Embedding Dim``."""
    expected = entry.weights.get('embedding_dim')
    if expected is None:
        return
    dim = embedding_dim(model)
    if dim != expected:
        raise ZooEntryMismatchError(
            f'{entry.name}: the zoo entry ({entry.metafile}) says "Embedding Dim: {expected}", '
            f'but the model built from {entry.config} with its weights gives {dim}-d '
            'embeddings; fix the entry\'s "Embedding Dim" or "Config"')
