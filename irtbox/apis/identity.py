"""Which model made an index's embeddings: a fingerprint compared when an index is loaded."""
import hashlib
import json
import os.path as osp
from typing import Dict, List, Optional

import torch

from irtbox.models.input_spec import input_spec_of
from irtbox.utils.checkpoint import TRAINING_ONLY_PREFIXES
from irtbox.utils.download import sha256sum

__all__ = ['COMPARED', 'weights_digest', 'embedding_dim', 'model_identity',
           'model_identity_differences']

# The fields that must agree for embeddings to be comparable (the rest are informational).
COMPARED = ('weights_sha256', 'preprocessing_sha256', 'embedding_dim', 'normalize')


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 over the model's inference weights (names, dtypes, shapes, bytes): equal for the
    same weights whatever file they came from (.pth, .safetensors, a zoo download)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        if name.startswith(TRAINING_ONLY_PREFIXES):
            continue
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f'{name}|{tensor.dtype}|{tuple(tensor.shape)}|'.encode())
        # reshape: a 0-d tensor (BatchNorm's num_batches_tracked) has no bytes view of its own.
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel()
                      else b'')
    return digest.hexdigest()


def embedding_dim(model: torch.nn.Module) -> int:
    """D of the model's B x D embeddings: one forward of a zero image of its input size
    (``model.input_spec.size``)."""
    height, width = input_spec_of(model, 'embedding_dim').size
    device = next(model.parameters()).device
    with torch.no_grad():
        return int(model(torch.zeros(1, 3, height, width, device=device),
                         mode='tensor').shape[-1])


def model_identity(model: torch.nn.Module, config: Optional[str] = None,
                   checkpoint: Optional[str] = None) -> Dict:
    """The fingerprint of ``model`` (which has ``model.input_spec``): its weights, its
    preprocessing (test pipeline, mean/std, channel order, test scales, whitening), embedding
    size and normalisation, plus the config file and checkpoint it came from."""
    spec = input_spec_of(model, 'model_identity')
    # The fields the first indexes hashed, as they were: the same model keeps its digest.
    preprocessing = dict(
        pipeline=list(spec.pipeline), mean=list(spec.mean), std=list(spec.std),
        channel_flip=spec.preprocessor_flips, test_scales=list(spec.test_scales),
        whitening=getattr(model, 'whitening', None) is not None)
    checkpoint = checkpoint or getattr(model, 'checkpoint', None)
    config = config or getattr(getattr(model, 'cfg', None), 'filename', None)
    return dict(config=config, checkpoint=checkpoint,
                checkpoint_sha256=sha256sum(checkpoint) if checkpoint and osp.isfile(
                    checkpoint) else None,
                weights_sha256=weights_digest(model),
                preprocessing_sha256=_digest(preprocessing), embedding_dim=embedding_dim(model),
                normalize=bool(getattr(model, 'normalize', True)))


def model_identity_differences(stored: Dict, current: Dict) -> List[str]:
    """Human-readable differences in the compared fields; empty when compatible."""
    names = dict(weights_sha256='model weights', preprocessing_sha256='preprocessing (test '
                 'pipeline, mean/std, channel order, scales, whitening)',
                 embedding_dim='embedding dimension', normalize='L2 normalisation')
    out = []
    for key in COMPARED:
        if stored.get(key) != current.get(key):
            out.append(f'{names[key]}: index {_short(stored.get(key))} vs model '
                       f'{_short(current.get(key))}')
    return out


def _short(value):
    return value[:12] + '...' if isinstance(value, str) and len(value) == 64 else value
