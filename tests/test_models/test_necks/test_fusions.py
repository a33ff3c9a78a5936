import pytest
import torch

from irtbox.models.necks import (FeatureFusion, fast_normalized_fusion, orthogonal_fusion,
                                 project_onto)
from irtbox.models.necks.fusions import FUSION_MODES


def maps(b=2, d=3, h=2, w=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, h, w, generator=g), torch.randn(b, d, h, w, generator=g)


def test_orthogonal_fusion_by_hand():
    # <y, u> = 11, <u, u> = 25: proj = 0.44 (3, 4) = (1.32, 1.76), y - proj = (-0.32, 0.24).
    y, u = torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, 4.0]])
    out = orthogonal_fusion(y, u, dim=-1, eps=0.0)
    torch.testing.assert_close(out, torch.tensor([[-0.32, 0.24, 3.0, 4.0]]))
    torch.testing.assert_close(project_onto(y, u, dim=-1, eps=0.0), torch.tensor([[1.32, 1.76]]))


def test_orthogonal_fusion_per_token_against_a_loop():
    y, u = maps()
    out = orthogonal_fusion(y, u, dim=1, eps=1e-6)
    assert out.shape == (2, 6, 2, 3)
    for b in range(2):
        for i in range(2):
            for j in range(3):
                yv, uv = y[b, :, i, j].tolist(), u[b, :, i, j].tolist()
                coef = sum(a * c for a, c in zip(yv, uv)) / (sum(c * c for c in uv) + 1e-6)
                expected = [a - coef * c for a, c in zip(yv, uv)] + uv
                torch.testing.assert_close(out[b, :, i, j], torch.tensor(expected))
    # Each token's first half is orthogonal to its second half.
    dots = (out[:, :3] * out[:, 3:]).sum(1)
    torch.testing.assert_close(dots, torch.zeros_like(dots), atol=1e-5, rtol=0)


def test_projection_on_a_zero_vector_is_zero():
    y, u = torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2)
    out = orthogonal_fusion(y, u, dim=-1)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.tensor([[1.0, 2.0, 0.0, 0.0]]))


def test_fast_normalized_by_hand():
    y, u = torch.tensor([2.0]), torch.tensor([8.0])
    # w = relu(0.5, 1.5) = (0.5, 1.5): (1 + 12) / (2 + eps).
    out = fast_normalized_fusion(y, u, torch.tensor([0.5, 1.5]), eps=1e-4)
    assert out.item() == pytest.approx(13.0 / 2.0001)
    # A negative weight is cut by the ReLU: only y remains.
    out = fast_normalized_fusion(y, u, torch.tensor([1.0, -3.0]), eps=0.0)
    assert out.item() == pytest.approx(2.0)


def test_each_mode_against_its_formula():
    y, u = maps()
    expected = {
        'y': y, 'u': u, 'sum': y + u, 'hadamard': y * u, 'concat': torch.cat([y, u], 1),
        # learned scalars start at 1: (Y + U) / (2 + 1e-4)
        'fast_normalized': (y + u) / (2 + 1e-4),
        'orthogonal': orthogonal_fusion(y, u, dim=1, eps=1e-6),
    }
    assert set(expected) == set(FUSION_MODES)
    for mode, value in expected.items():
        fusion = FeatureFusion(mode)
        out = fusion(y, u)
        torch.testing.assert_close(out, value, msg=mode)
        assert out.shape[1] == fusion.out_channels(3), mode
    assert FeatureFusion('concat').out_channels(768) == 1536
    assert FeatureFusion('sum').out_channels(768) == 768


def test_fusion_parameters_and_gradients():
    assert [n for n, _ in FeatureFusion('orthogonal').named_parameters()] == []
    fusion = FeatureFusion('fast_normalized')
    y, u = maps()
    fusion(y, u).sum().backward()
    assert fusion.v.grad is not None and fusion.v.grad.abs().sum() > 0


def test_fusion_errors():
    with pytest.raises(ValueError, match="mode='max'"):
        FeatureFusion('max')
    y, _ = maps()
    with pytest.raises(ValueError, match='same shape'):
        FeatureFusion('sum')(y, y[:, :2])
    # 'y' needs no U (no ELM is built for it).
    torch.testing.assert_close(FeatureFusion('y')(y, None), y)
