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


def fake_gpu(monkeypatch, major, emulates=True, with_argument=True):
    """torch.cuda as on a GPU of compute capability ``major``.0, whose
    ``is_bf16_supported()`` counts emulated bf16 (as torch's does on pre-Ampere GPUs)."""
    def is_bf16_supported(including_emulation=True):
        return major >= 8 or (including_emulation and emulates)

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'get_device_capability', lambda device=None: (major, 0))
    monkeypatch.setattr(torch.cuda, 'is_bf16_supported', is_bf16_supported if with_argument
                        else lambda: is_bf16_supported())


@pytest.mark.parametrize('with_argument', [True, False])
@pytest.mark.parametrize('major, native', [(7, False), (8, True), (9, True)])
def test_auto_needs_native_bf16(monkeypatch, major, native, with_argument):
    # A V100 (7.0) emulates bf16, slower than float32: auto leaves it off.
    fake_gpu(monkeypatch, major, with_argument=with_argument)
    assert bf16_autocast_available() is native
    assert build('auto', nn.Linear(2, 2)).enabled is native


def test_auto_is_off_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert bf16_autocast_available() is False


@pytest.mark.gpu
def test_auto_on_this_gpu():
    capability = torch.cuda.get_device_capability()
    assert bf16_autocast_available() is (capability >= (8, 0))


@pytest.mark.parametrize('cfg, expected', [
    (dict(optim_wrapper=dict(type='BF16AutocastOptimWrapper', enabled='auto')), True),
    (dict(optim_wrapper=dict(type='BF16AutocastOptimWrapper')), True),
    (dict(optim_wrapper=dict(type='BF16AutocastOptimWrapper', enabled=True)), True),
    (dict(optim_wrapper=dict(type='BF16AutocastOptimWrapper', enabled=False)), False),
    (dict(optim_wrapper=dict(type='BF16AutocastOptimWrapper'), test_autocast=False), False),
    (dict(optim_wrapper=dict(type='OptimWrapper')), False),
    (dict(optim_wrapper=dict(type='OptimWrapper'), test_autocast=True), True),
    (dict(), False)])
def test_testing_and_extraction_autocast_as_the_training_does(monkeypatch, cfg, expected):
    """Issue 47 item 10: a config that trains under bf16 autocast tests and extracts so too
    (``test_autocast`` True / False says otherwise), on a GPU with native bf16 only."""
    from irtbox.engine.optim_wrappers import bf16_autocast, bf16_inference
    assert bf16_inference(cfg) is False  # no GPU here
    monkeypatch.setattr(bf16_autocast, 'bf16_autocast_available', lambda: True)
    assert bf16_inference(cfg) is expected
