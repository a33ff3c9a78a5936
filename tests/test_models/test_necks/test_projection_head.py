import pytest
import torch

from irtbox.models.necks import LinearProjection
from irtbox.registry import MODELS


def test_linear_projection_matches_matrix_product():
    torch.manual_seed(0)
    neck = MODELS.build(dict(type='LinearProjection', in_dim=5, out_dim=3))
    assert isinstance(neck, LinearProjection)
    x = torch.randn(4, 5)
    weight, bias = neck.fc.weight, neck.fc.bias
    # Written out element by element, independent of nn.Linear.
    expected = torch.tensor([[sum(float(weight[o, i]) * float(x[b, i]) for i in range(5))
                              + float(bias[o]) for o in range(3)] for b in range(4)])
    torch.testing.assert_close(neck(x), expected, rtol=1e-5, atol=1e-6)


def test_linear_projection_trains_and_can_enlarge():
    neck = LinearProjection(in_dim=4, out_dim=8, bias=False)
    assert neck.fc.bias is None
    x = torch.randn(2, 4)
    neck(x).sum().backward()
    torch.testing.assert_close(neck.fc.weight.grad, x.sum(0).expand(8, 4))


@pytest.mark.parametrize('kwargs', [dict(in_dim=0, out_dim=3), dict(in_dim=4, out_dim=2.5)])
def test_linear_projection_bad_dims(kwargs):
    with pytest.raises(ValueError, match='LinearProjection'):
        LinearProjection(**kwargs)


def test_linear_projection_bad_input():
    with pytest.raises(ValueError, match='B x 4'):
        LinearProjection(4, 2)(torch.randn(2, 5))


def test_linear_projection_none_is_identity_without_parameters():
    neck = LinearProjection(in_dim=4, out_dim=None)
    x = torch.randn(3, 4)
    assert neck(x) is x
    assert list(neck.parameters()) == []
    with pytest.raises(ValueError, match='B x 4'):
        neck(torch.randn(3, 5))
    with pytest.raises(ValueError,
                       match='^LinearProjection: in_dim must be a positive integer, got None$'):
        LinearProjection(in_dim=None, out_dim=None)
