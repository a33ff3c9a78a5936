"""An optimizer wrapper that runs the forward pass and the losses under bf16 autocast when the
hardware supports it, and in float32 otherwise (so one config runs on GPUs and CPUs)."""
import inspect
from contextlib import contextmanager
from typing import Union

import torch
from mmengine.optim import OptimWrapper
from torch import nn

from irtbox.registry import OPTIM_WRAPPERS

__all__ = ['bf16_autocast_available', 'bf16_inference', 'BF16AutocastOptimWrapper']


def bf16_autocast_available() -> bool:
    """True on a CUDA GPU with native bfloat16 support (Ampere and later).
    ``torch.cuda.is_bf16_supported()`` also says True where bf16 is only emulated (V100, T4), where
    bf16 autocast is slower than float32."""
    if not torch.cuda.is_available():
        return False
    if 'including_emulation' in inspect.signature(torch.cuda.is_bf16_supported).parameters:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return torch.cuda.get_device_capability() >= (8, 0)


def bf16_inference(cfg) -> bool:
    """Whether the model of config ``cfg`` tests and extracts under bf16 autocast (set on it as
    ``model.bf16_inference`` by ``init_model`` and the runner): the config's ``test_autocast``
    (True / False), else as it trains (a :class:`BF16AutocastOptimWrapper` not disabled); and
    only on a CUDA GPU with native bf16 (:func:`bf16_autocast_available`)."""
    wanted = cfg.get('test_autocast')
    if wanted is None:
        wrapper = cfg.get('optim_wrapper') or {}
        wanted = wrapper.get('type') in (
            'BF16AutocastOptimWrapper', 'irtbox.BF16AutocastOptimWrapper',
            BF16AutocastOptimWrapper) and wrapper.get('enabled', 'auto') is not False
    return bool(wanted) and bf16_autocast_available()


@OPTIM_WRAPPERS.register_module()
class BF16AutocastOptimWrapper(OptimWrapper):
    """:class:`~mmengine.optim.OptimWrapper` whose ``optim_context`` (the training forward and loss
    of ``model.train_step``) runs under ``torch.autocast(dtype=torch.bfloat16)``: the
    training-recipe benchmark's "bf16 autocast when available" (Berton, Musgrave & Masone, Sec. 3).
    bf16 has float32's exponent range, so, unlike ``AmpOptimWrapper`` for float16, no loss scaling
    is needed. Validation and testing are not affected; losses that need float32 turn autocast off
    themselves.

    Args:
        enabled (bool | str): ``'auto'``: on a CUDA device with native bf16 support, float32
            elsewhere; ``True``: always (on the CPU without CUDA: slow, but exact to check).
        **kwargs: :class:`~mmengine.optim.OptimWrapper` arguments.
    """

    def __init__(self, enabled: Union[bool, str] = 'auto', **kwargs):
        if enabled not in (True, False, 'auto'):
            raise ValueError(f"BF16AutocastOptimWrapper: enabled must be True, False or 'auto', "
                             f'got {enabled!r}')
        super().__init__(**kwargs)
        self.enabled = bf16_autocast_available() if enabled == 'auto' else enabled
        self.device_type = 'cuda' if torch.cuda.is_available() else 'cpu'

    @contextmanager
    def optim_context(self, model: nn.Module):
        with super().optim_context(model), torch.autocast(
                self.device_type, dtype=torch.bfloat16, enabled=self.enabled):
            yield
