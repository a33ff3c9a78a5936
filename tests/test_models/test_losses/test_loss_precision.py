import pytest
import torch
import torch.nn.functional as F

from irtbox.registry import MODELS
import irtbox.models.losses  # noqa: F401  (registers the losses)

CONFIGS = [
    dict(type='ContrastiveLoss', margin=0.3),
    dict(type='ContrastiveLoss', margin=0.3, memory_size=16, embed_dim=8),
    dict(type='KoLeoLoss'),
    dict(type='NormalizedSoftmaxLoss', num_classes=4, embed_dim=8),
    dict(type='ScalableNCALoss', memory_size=16, embed_dim=8),
]


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return (F.normalize(torch.randn(12, 8, generator=g), dim=1),
            torch.randint(0, 4, (12, ), generator=g))


@pytest.mark.parametrize('cfg', CONFIGS, ids=lambda c: c['type'])
def test_low_precision_embeddings_are_computed_in_float32(cfg):
    torch.manual_seed(0)
    loss = MODELS.build(cfg)
    torch.manual_seed(0)
    reference = MODELS.build(cfg)
    for seed in range(2):  # second round reads the memory
        z, y = inputs(seed)
        z16 = z.bfloat16().requires_grad_()
        out = loss(z16, y)
        assert out.dtype == torch.float32
        assert out.item() == reference(z16.detach().float(), y).item()
        out.backward()
        assert z16.grad.dtype == torch.bfloat16


@pytest.mark.parametrize('cfg', CONFIGS, ids=lambda c: c['type'])
def test_autocast_is_turned_off_inside(cfg):
    torch.manual_seed(0)
    loss = MODELS.build(cfg)
    torch.manual_seed(0)
    reference = MODELS.build(cfg)
    for seed in range(2):
        z, y = inputs(seed)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out = loss(z, y)
        assert out.dtype == torch.float32
        assert out.item() == reference(z, y).item()
