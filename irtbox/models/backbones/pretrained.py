"""Getting a backbone's pretrained weights: once per node, its local rank 0 first, one clear
line when they cannot be had."""
import contextlib
import os
from typing import Callable, Optional

import torch
from mmengine import dist as mmdist

from irtbox.utils.errors import IrtboxError

__all__ = ['PretrainedWeightsUnavailable', 'create_timm_model', 'offline_hub', 'hub_unreachable',
           'pretrained_init_cfg']


class PretrainedWeightsUnavailable(IrtboxError, RuntimeError):
    """A backbone's pretrained weights could not be downloaded or read from the cache."""


def _hub_cache() -> str:
    try:
        from huggingface_hub import constants
        return constants.HF_HUB_CACHE
    except ImportError:  # timm then reads torch hub's cache only
        return os.path.join(torch.hub.get_dir(), 'checkpoints')


# Seconds the one request that tells whether the hub can be reached may take.
HUB_PROBE_TIMEOUT = 5
WAYS_OUT = ('Ways out: HF_HUB_OFFLINE=1 with a cached copy of the weights; a local state dict '
            'of the timm model, the config entries model.backbone.pretrained=False and '
            'model.backbone.checkpoint=PATH (in Python: get_model(name, cfg_options=...) or '
            "init_model(config, cfg_options=...) with {'model.backbone.pretrained': False, "
            "'model.backbone.checkpoint': PATH}); or model.backbone.pretrained=False alone "
            '(random weights).')


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f'{type(error).__name__}: {text.splitlines()[0][:200] if text else ""}'.rstrip(': ')


def _unavailable(model_name: str, error: BaseException,
                 unreachable: Optional[str] = None) -> PretrainedWeightsUnavailable:
    if unreachable:
        return PretrainedWeightsUnavailable(
            f"cannot get timm's pretrained weights of {model_name!r}: the Hugging Face hub "
            f'cannot be reached ({unreachable}; no network?) and they are not in the cache '
            f'{_hub_cache()} ({_first_line(error)}). {WAYS_OUT}')
    return PretrainedWeightsUnavailable(
        f"cannot get timm's pretrained weights of {model_name!r} ({_first_line(error)}); "
        f'cache: {_hub_cache()}. {WAYS_OUT}')


def hub_unreachable(timeout: float = HUB_PROBE_TIMEOUT) -> Optional[str]:
    """Why the Hugging Face hub cannot be reached ("ConnectError: ..."), from one request without
    retries through huggingface_hub's own client (its proxies and endpoint, ``HF_ENDPOINT``);
    None when it answers, when it is not to be asked (``HF_HUB_OFFLINE``) or when huggingface_hub
    is not installed. Asked before a download because huggingface_hub retries a failed connection
    for about 25 s per file (timm asks for two) before giving up."""
    try:
        from huggingface_hub import constants
        from huggingface_hub.utils import get_session
    except ImportError:
        return None
    if constants.HF_HUB_OFFLINE:
        return None
    try:
        get_session().head(constants.ENDPOINT, timeout=timeout)
    except Exception as error:  # noqa: BLE001 (any client's network, proxy or TLS error)
        return f'{constants.ENDPOINT}: {_first_line(error)}'
    return None


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
    download of pretrained weights made once per node.

    In a distributed job each node's local rank 0 downloads (or reads its cache) while the
    other ranks wait, then read that cache offline; nodes need not share a cache (where they
    do, the hub's file locks keep them apart). Without a network (:func:`hub_unreachable`)
    the cache is read at once. A download that cannot happen raises
    :class:`PretrainedWeightsUnavailable` on every rank, naming the weights and the cache.
    """
    if create is None:
        import timm
        create = timm.create_model
    if not pretrained:
        return create(model_name, pretrained=False, **kwargs)
    rank, world = mmdist.get_rank(), mmdist.get_world_size()
    fetches = world == 1 or int(os.environ.get('LOCAL_RANK', rank)) == 0
    model, failure = None, None
    if fetches:
        # No network: the cache only, at once, rather than a minute of the hub's retries.
        unreachable = hub_unreachable()
        try:
            with offline_hub() if unreachable else contextlib.nullcontext():
                model = create(model_name, pretrained=True, **kwargs)
        except Exception as error:  # noqa: BLE001 (hub, network and file errors alike)
            failure = _unavailable(model_name, error, unreachable)
    if world > 1:
        said = mmdist.all_gather_object(None if failure is None else str(failure))
        if failure is None:
            first = next(((r, m) for r, m in enumerate(said) if m is not None), None)
            if first is not None:
                raise PretrainedWeightsUnavailable(f'(rank {first[0]}) {first[1]}')
    if failure is not None:
        raise failure
    if model is not None:
        return model
    try:
        with offline_hub():  # this node's rank 0 has filled the cache: never ask the hub
            return create(model_name, pretrained=True, **kwargs)
    except Exception as error:  # noqa: BLE001
        raise PretrainedWeightsUnavailable(
            f'(rank {rank}) this node\'s local rank 0 got the weights, but this rank cannot '
            f'read them from its cache {_hub_cache()}: the ranks of a node must share their '
            f'cache (HF_HOME / TORCH_HOME). {_unavailable(model_name, error)}') from error
