"""CosFaceLoss against PyTorch Metric Learning's CosFaceLoss (same inputs, same weights)
and against the formula written out by hand."""
import math

import pytest
import torch

from irtbox.models.losses import CosFaceLoss, cosface_loss
from irtbox.registry import MODELS

pml_losses = pytest.importorskip('pytorch_metric_learning.losses',
                                 reason='pytorch-metric-learning is not installed')


def batch(n=10, dim=8, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, dim, generator=g, dtype=torch.float64),
            torch.randint(0, classes, (n, ), generator=g))


@pytest.mark.parametrize('margin, scale', [(0.35, 64.0), (0.1, 10.0), (0.0, 30.0)])
def test_value_and_gradients_match_pml(margin, scale):
    x, y = batch()
    ours = MODELS.build(dict(type='CosFaceLoss', num_classes=5, embed_dim=8, margin=margin,
                             scale=scale)).double()
    reference = pml_losses.CosFaceLoss(num_classes=5, embedding_size=8, margin=margin,
                                       scale=scale).double()
    with torch.no_grad():
        ours.class_weights.copy_(reference.W.T)  # PML's W is D x C
    values, grads = [], []
    for loss in (ours, reference):
        x_ = x.clone().requires_grad_()
        value = loss(x_, y)
        weights = loss.class_weights if loss is ours else loss.W
        g_x, g_w = torch.autograd.grad(value, [x_, weights])
        values.append(value.detach())
        grads.append((g_x, g_w.T if loss is reference else g_w))
    torch.testing.assert_close(values[0], values[1], rtol=1e-12, atol=0)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_formula_by_hand():
    x, y = batch(n=3, dim=2, classes=2)
    w = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)  # row norms 1 and 2
    m, s = 0.2, 4.0
    total = 0.0
    for xi, yi in zip(x, y):
        unit = xi / xi.norm()
        cos = [float(unit[0]), float(unit[1])]  # w_0 = e_0, w_1 / |w_1| = e_1
        logits = [s * (c - m) if j == int(yi) else s * c for j, c in enumerate(cos)]
        total += -logits[int(yi)] + math.log(sum(math.exp(v) for v in logits))
    assert float(cosface_loss(x, y, w, m, s)) == pytest.approx(total / 3, rel=1e-12)


def test_arguments_checked():
    with pytest.raises(ValueError, match='^CosFaceLoss: margin must be a non-negative number, got -0.1'):
        CosFaceLoss(3, 2, margin=-0.1)
    with pytest.raises(ValueError, match='^CosFaceLoss: scale must be a positive number, got 0'):
        CosFaceLoss(3, 2, scale=0)
    with pytest.raises(ValueError, match=r'^CosFaceLoss: labels must lie in \[0, 3\)'):
        CosFaceLoss(3, 2)(torch.randn(2, 2), torch.tensor([0, 3]))
    assert repr(CosFaceLoss(3, 2)) == 'CosFaceLoss(num_classes=3, embed_dim=2, margin=0.35, ' \
                                      'scale=64.0)'
