"""Safe checkpoint loading (``torch.load(weights_only=True)`` with an allow-list).
``weights_only=True`` rejects the objects MMEngine stores in its checkpoints (the message hub's
history buffers and the numpy values inside them); turning it off would let a downloaded file run
arbitrary code. So exactly those classes are allowed, and MMEngine's loaders go through the same
safe ``torch.load`` while irtbox's runner loads."""
import contextlib
import hashlib
import os
import os.path as osp
import zipfile
from typing import Dict, Optional, Sequence, Union

import numpy as np
import torch
from mmengine.logging import HistoryBuffer, print_log
from mmengine.runner.checkpoint import CheckpointLoader

from .download import download
from .errors import ArgumentError, IrtboxError
from .mmengine_compat import checkpoint_loaders_restored

__all__ = ['register_safe_globals', 'safe_checkpoint_loaders', 'safe_torch_load',
           'checkpoint_problem', 'load_safetensors', 'download_checkpoint', 'extract_state_dict', 'load_state_dict_file',
           'TRAINING_ONLY_PREFIXES', 'CheckpointMismatchError', 'load_model_weights',
           'WRAPPER_PREFIXES', 'strip_prefixes', 'state_digest']

_registered = False

# Wrappers around a timm model's weights: DDP (``module.``), a whole irtbox model
# (``backbone.model.``, ``backbone.``) and other wrappers (``model.``).
WRAPPER_PREFIXES = ('module.', 'backbone.model.', 'backbone.', 'model.')


def _numpy_safe_globals():
    multiarray = (getattr(np, '_core', None) or np.core).multiarray
    return [np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar] + [
        type(np.dtype(name)) for name in ('float64', 'int64', 'float32', 'int32', 'bool')]


def _history_buffer_getattr(obj, name):
    """The only ``getattr`` a checkpoint may call: MMEngine pickles HistoryBuffer's statistics
    methods as ``getattr(HistoryBuffer, 'min')``, and the builtin would reach any attribute."""
    if obj is HistoryBuffer and name in ('min', 'max', 'current', 'mean'):
        return getattr(obj, name)
    raise RuntimeError(f'checkpoint refused: it asks for getattr({obj!r}, {name!r})')


def register_safe_globals() -> None:
    """Allow MMEngine's checkpoint contents under ``weights_only=True``; idempotent."""
    global _registered
    if _registered:
        return
    torch.serialization.add_safe_globals(
        [HistoryBuffer, *_numpy_safe_globals(), (_history_buffer_getattr, 'builtins.getattr')])
    _registered = True


@contextlib.contextmanager
def safe_checkpoint_loaders():
    """Within it, MMEngine's ``CheckpointLoader`` reads local files and http(s) URLs through
    irtbox's safe loaders; on exit MMEngine's own loaders are back, so nothing outside
    irtbox's loading changes."""
    register_safe_globals()
    with checkpoint_loaders_restored():
        CheckpointLoader.register_scheme(prefixes='', force=True)(_load_local)
        CheckpointLoader.register_scheme(prefixes=('http://', 'https://'), force=True)(_load_url)
        yield


def safe_torch_load(path: str, map_location='cpu'):
    """``torch.load`` with ``weights_only=True``, a ``.safetensors`` file with safetensors."""
    register_safe_globals()
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint file not found: {path}')
    if path.endswith('.safetensors'):
        return load_safetensors(path, map_location)
    problem = checkpoint_problem(path, verify_crc=False)
    if problem is not None:
        raise RuntimeError(f'{path}: {problem}')
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # re-raised with the file name and the safe-load context
        if not zipfile.is_zipfile(path):
            raise RuntimeError(f'{path} is not a PyTorch checkpoint (neither a zip archive as '
                               f'torch.save writes nor a legacy pickle: {err})') from err
        raise RuntimeError(
            f'could not load checkpoint {path} with torch.load(weights_only=True): {err}. '
            'irtbox only loads tensors, containers and the MMEngine objects it allow-lists; '
            'a file needing other Python objects is refused for safety.') from err


def checkpoint_problem(path: str, verify_crc: bool = True) -> Optional[str]:
    """What is wrong with the ``.pth`` file ``path`` (None when it looks intact), without
    unpickling it: missing, empty, truncated, a corrupt zip member (only with ``verify_crc``:
    reads the whole file). A file that is no zip archive may be a legacy pickle: not reported."""
    if not osp.isfile(path):
        return 'file not found'
    if os.path.getsize(path) == 0:
        return 'empty file (0 bytes): not a PyTorch checkpoint'
    with open(path, 'rb') as f:
        is_zip_start = f.read(4) == b'PK\x03\x04'
    if not zipfile.is_zipfile(path):
        # torch.save's zip archive starts with a local header and ends with the central
        # directory: a start without an end is a file cut short (killed while writing).
        return 'truncated checkpoint (a zip archive without its end)' if is_zip_start else None
    if verify_crc:
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            return f'corrupt checkpoint ({err})'
        if bad is not None:
            return f'corrupt checkpoint (member {bad} fails its CRC check)'
    return None


def load_safetensors(path: str, map_location='cpu') -> Dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file, with a message naming the file on failure."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    device = map_location if isinstance(map_location, (str, torch.device)) else 'cpu'
    try:
        return load_file(path, device=str(device))
    except (SafetensorError, OSError, ValueError) as err:
        raise RuntimeError(f'could not read safetensors checkpoint {path}: {err}') from err


def download_checkpoint(url: str, model_dir: Optional[str] = None,
                        sha256: Optional[str] = None) -> str:
    """The local path of ``url``, downloaded once and verified
    (:func:`irtbox.utils.download.download`)."""
    return download(url, sha256, cache_dir=model_dir)


def _load_local(filename, map_location=None):
    return safe_torch_load(osp.expanduser(filename), map_location or 'cpu')


def _load_url(filename, map_location=None, model_dir=None):
    return safe_torch_load(download_checkpoint(filename, model_dir), map_location or 'cpu')


def extract_state_dict(checkpoint) -> Dict[str, torch.Tensor]:
    """The state dict inside a checkpoint (bare, or under ``state_dict`` / ``model``)."""
    if isinstance(checkpoint, dict):
        for key in ('state_dict', 'model'):
            if isinstance(checkpoint.get(key), dict):
                return checkpoint[key]
        return checkpoint
    raise TypeError(f'expected a checkpoint dict, got {type(checkpoint).__name__}')


def strip_prefixes(state_dict: Dict[str, torch.Tensor],
                   prefixes: Sequence[str] = WRAPPER_PREFIXES) -> Dict[str, torch.Tensor]:
    """``state_dict`` with wrapper prefixes removed: each of ``prefixes`` in turn is cut
    when every key starts with it (so ``module.backbone.model.x`` -> ``x``)."""
    for prefix in prefixes:
        if state_dict and all(k.startswith(prefix) for k in state_dict):
            state_dict = {k[len(prefix):]: v for k, v in state_dict.items()}
    return state_dict


def load_state_dict_file(path_or_url: str) -> Dict[str, torch.Tensor]:
    """Load a state dict from a local file or an http(s) URL, safely."""
    load = _load_url if path_or_url.startswith(('http://', 'https://')) else _load_local
    return extract_state_dict(load(path_or_url))


# Parts of a retriever used only for training (the losses' classifiers and memories, the
# momentum encoder): a published inference checkpoint may leave them out.
TRAINING_ONLY_PREFIXES = ('head.', 'momentum_encoder.')


class CheckpointMismatchError(IrtboxError, ValueError):
    """A checkpoint whose keys or shapes do not match the model built from the config."""


def load_model_weights(model: torch.nn.Module, checkpoint: Union[str, Dict[str, torch.Tensor]],
                       source: Optional[str] = None, training_parts: str = 'optional') -> None:
    """Load ``checkpoint`` (a path or URL, ``.pth`` or ``.safetensors``, or a state dict read from
    ``source``) into ``model``. Every key and shape must match, except for the training-only parts
    (:data:`TRAINING_ONLY_PREFIXES`): ``training_parts='optional'``: they may be absent (a published
    checkpoint); ``'required'``: they must match (resuming); ``'ignored'``: left as built when
    absent or of another shape (evaluation)."""
    if training_parts not in ('optional', 'required', 'ignored'):
        raise ArgumentError(f"training_parts={training_parts!r}; expected 'optional', 'required' "
                            "or 'ignored'", 'training_parts')
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


def state_digest(state: Dict[str, torch.Tensor]) -> str:
    """sha256 of a state dict (every key, dtype, shape and raw bytes, in key order): equal
    exactly when the weights are bit-identical."""
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous().reshape(-1)
        digest.update(f'{key}:{tensor.dtype}:{tuple(state[key].shape)};'.encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
