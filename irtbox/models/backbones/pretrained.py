"""Getting a backbone's pretrained weights: once per job, rank 0 first, one clear line when
they cannot be had."""
import contextlib
import os
from typing import Callable, Optional

import torch
from mmengine import dist as mmdist

__all__ = ['PretrainedWeightsUnavailable', 'create_timm_model', 'offline_hub',
           'pretrained_init_cfg']


class PretrainedWeightsUnavailable(RuntimeError):
    """A backbone's pretrained weights could not be downloaded or read from the cache."""


def _hub_cache() -> str:
    try:
        from huggingface_hub import constants
        return constants.HF_HUB_CACHE
    except ImportError:  # timm then reads torch hub's cache only
        return os.path.join(torch.hub.get_dir(), 'checkpoints')


def _unavailable(model_name: str, error: BaseException) -> PretrainedWeightsUnavailable:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return PretrainedWeightsUnavailable(
        f"cannot get timm's pretrained weights of {model_name!r} ({type(error).__name__}: "
        f'{reason[:200]}); cache: {_hub_cache()}. Ways out: HF_HUB_OFFLINE=1 with a cached '
        'copy of the weights, model.backbone.checkpoint=PATH (a local state dict of the timm '
        'model), or model.backbone.pretrained=False (random weights).')


@contextlib.contextmanager
def offline_hub():
    """Within it, the Hugging Face hub is never asked: weights come from the local cache
    or not at all (as with ``HF_HUB_OFFLINE=1``)."""
    try:
        from huggingface_hub import constants
    except ImportError:
        yield
        return
    previous = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = previous


def pretrained_init_cfg(init_cfg) -> Optional[dict]:
    """The ``type='Pretrained'`` entry of an MMEngine ``init_cfg`` (a dict or a list), if any."""
    for entry in init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]:
        if isinstance(entry, dict) and entry.get('type') == 'Pretrained':
            return entry
    return None


def create_timm_model(model_name: str, pretrained: bool, create: Optional[Callable] = None,
                      **kwargs) -> torch.nn.Module:
    """``timm.create_model(model_name, pretrained=pretrained, **kwargs)``, with the
    download of pretrained weights made once per job.

    In a distributed job rank 0 downloads (or reads its cache) while the other ranks wait;
    it then tells them whether it succeeded, and they read the cache rank 0 filled, offline.
    A download that cannot happen raises :class:`PretrainedWeightsUnavailable` on every
    rank, naming the weights, the cache and the ways out, instead of each rank retrying
    the hub on its own and printing its traceback.
    """
    if create is None:
        import timm
        create = timm.create_model
    if not pretrained:
        return create(model_name, pretrained=False, **kwargs)
    distributed = mmdist.get_world_size() > 1
    if mmdist.get_rank() == 0:
        model, failure = None, None
        try:
            model = create(model_name, pretrained=True, **kwargs)
        except Exception as error:  # noqa: BLE001 (hub, network and file errors alike)
            failure = _unavailable(model_name, error)
        if distributed:
            mmdist.broadcast_object_list([None if failure is None else str(failure)], src=0)
        if failure is not None:
            raise failure
        return model
    message = [None]
    mmdist.broadcast_object_list(message, src=0)
    if message[0] is not None:
        raise PretrainedWeightsUnavailable(f'(rank 0) {message[0]}')
    try:
        with offline_hub():  # rank 0 has filled the cache: never ask the hub again
            return create(model_name, pretrained=True, **kwargs)
    except Exception as error:  # noqa: BLE001
        raise _unavailable(model_name, error) from error
