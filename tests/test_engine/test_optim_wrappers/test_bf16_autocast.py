import pytest
import torch
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope
from torch import nn

from irtbox.engine.optim_wrappers import BF16AutocastOptimWrapper, bf16_autocast_available
from irtbox.models.losses import PMLLoss


def build(enabled, model):
    with DefaultScope.overwrite_default_scope('irtbox'):
        return build_optim_wrapper(model, dict(
            type='BF16AutocastOptimWrapper', enabled=enabled,
            optimizer=dict(type='Adam', lr=1e-3)))


def test_forward_is_bf16_inside_the_context_and_float32_outside():
    model = nn.Linear(4, 3)
    wrapper = build(True, model)
    assert isinstance(wrapper, BF16AutocastOptimWrapper)
    x = torch.randn(2, 4)
    with wrapper.optim_context(model):
        y = model(x)
        # The benchmark's losses leave autocast and compute in float32.
        loss = PMLLoss('ContrastiveLoss', miner=None)(y, torch.tensor([0, 0]))
    assert y.dtype == torch.bfloat16 and loss.dtype == torch.float32
    assert model(x).dtype == torch.float32
    wrapper.update_params(loss)  # a plain step: bf16 needs no loss scaling
    assert model.weight.dtype == torch.float32


def test_disabled_and_auto():
    model = nn.Linear(4, 3)
    with build(False, model).optim_context(model):
        assert model(torch.randn(2, 4)).dtype == torch.float32
    assert build('auto', model).enabled == bf16_autocast_available()


def test_bad_enabled():
    with pytest.raises(ValueError, match="enabled must be True, False or 'auto', got 'yes'"):
        build('yes', nn.Linear(2, 2))
