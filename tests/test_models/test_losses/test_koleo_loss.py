import math

import pytest
import torch
import torch.nn.functional as F

from irtbox.models.losses import KoLeoLoss, koleo_loss
from irtbox.registry import MODELS


def brute_force(z, eps=1e-8):
    """Eq. 5 with explicit loops."""
    n = len(z)
    rho = [min(float((z[i] - z[j]).norm()) for j in range(n) if j != i) for i in range(n)]
    return -sum(math.log(r + eps) for r in rho) / n


def test_hand_computed():
    z = torch.tensor([[1., 0.], [0., 1.], [0.6, 0.8], [-1., 0.]])
    # squared distances: d01=2, d02=0.8, d03=4, d12=0.4, d13=2, d23=3.2
    # rho^2: z0 -> 0.8 (z2), z1 -> 0.4 (z2), z2 -> 0.4 (z1), z3 -> 2 (z1)
    # L = -(1/4) sum 0.5 log(rho^2) = -(1/8) log(0.8 * 0.4 * 0.4 * 2)
    expected = -math.log(0.8 * 0.4 * 0.4 * 2) / 8
    assert koleo_loss(z).item() == pytest.approx(expected, rel=1e-6)
    assert KoLeoLoss()(z, torch.zeros(4, dtype=torch.long)).item() == pytest.approx(
        expected, rel=1e-6)


@pytest.mark.parametrize('n, d', [(2, 3), (9, 4), (40, 16)])
def test_matches_loops_on_random_input(n, d):
    g = torch.Generator().manual_seed(n)
    z = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)
    assert koleo_loss(z).item() == pytest.approx(brute_force(z), rel=1e-9)


def test_duplicates_are_finite_with_zero_gradient_for_the_pair():
    z = torch.tensor([[1., 0.], [1., 0.], [0., 1.]], requires_grad=True)
    out = koleo_loss(z, eps=1e-8)
    # rho = 0, 0, sqrt(2): -(2 log(1e-8) + log(sqrt(2) + 1e-8)) / 3
    assert out.item() == pytest.approx(-(2 * math.log(1e-8) + math.log(math.sqrt(2))) / 3,
                                       rel=1e-6)
    out.backward()
    assert torch.isfinite(z.grad).all()


def test_labels_do_not_matter():
    z = F.normalize(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    loss = KoLeoLoss()
    assert loss(z, torch.arange(5)).item() == loss(z, torch.zeros(5, dtype=torch.long)).item()


def test_gradcheck():
    raw = torch.randn(7, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64,
                      requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: koleo_loss(F.normalize(x, dim=1)), (raw, ))


def test_registry_and_bad_input():
    loss = MODELS.build(dict(type='KoLeoLoss', eps=1e-6))
    assert isinstance(loss, KoLeoLoss) and loss.eps == 1e-6
    with pytest.raises(ValueError, match='KoLeoLoss: needs a batch of at least 2'):
        loss(torch.ones(1, 3), torch.zeros(1, dtype=torch.long))
