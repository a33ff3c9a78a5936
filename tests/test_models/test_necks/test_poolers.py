import pytest
import torch

from irtbox.models.necks import (AvgPool, ClsTokenPool, DistTokenPool, GeMPool, L2Norm, MaxPool,
                                 gem)
from irtbox.structures import ViTFeatures


def vit_output(b=2, d=4, h=2, w=3, prefix=2):
    torch.manual_seed(0)
    return (ViTFeatures(torch.randn(b, prefix, d), torch.randn(b, d, h, w)),)


def test_token_poolers():
    feats = vit_output()
    torch.testing.assert_close(ClsTokenPool()(feats), feats[0].prefix[:, 0])
    torch.testing.assert_close(DistTokenPool()(feats), feats[0].prefix[:, 1])
    with pytest.raises(ValueError, match='distillation token'):
        DistTokenPool()(vit_output(prefix=1))
    with pytest.raises(ValueError, match='vision transformer'):
        ClsTokenPool()((torch.randn(1, 4, 2, 2),))


def test_map_poolers_by_hand():
    grid = torch.tensor([[[[1.0, 2.0], [3.0, 6.0]]]])  # B=1, C=1, 2x2
    feats = (ViTFeatures(torch.zeros(1, 1, 1), grid),)
    assert AvgPool()(feats).item() == pytest.approx(3.0)
    assert MaxPool()(feats).item() == pytest.approx(6.0)
    expected = ((1 + 8 + 27 + 216) / 4) ** (1 / 3)
    assert GeMPool(p=3)(feats).item() == pytest.approx(expected)
    # CNN maps are accepted as they are.
    assert GeMPool(p=1)((grid,)).item() == pytest.approx(3.0)


def test_gem_clamps_and_learns_p():
    x = torch.tensor([[[[-1.0, 4.0]]]])
    assert gem(x, torch.tensor([1.0]), eps=1e-6).item() == pytest.approx((1e-6 + 4.0) / 2)
    pool = GeMPool(p=3.0)
    assert isinstance(pool.p, torch.nn.Parameter)
    pool((ViTFeatures(torch.zeros(1, 1, 1), torch.rand(1, 3, 2, 2) + 0.1),)).sum().backward()
    assert pool.p.grad is not None
    fixed = GeMPool(p=3.0, learnable=False)
    assert 'p' in dict(fixed.named_buffers())


def test_l2norm():
    out = L2Norm()(torch.tensor([[3.0, 4.0]]))
    torch.testing.assert_close(out, torch.tensor([[0.6, 0.8]]))
