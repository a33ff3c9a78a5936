import math

import pytest
import torch
import torch.nn.functional as F

from irtbox.models.losses import ScalableNCALoss, scalable_nca_loss
from irtbox.registry import MODELS


def brute_force(z, y, tau, ref_z=None, ref_y=None):
    """NCA with explicit loops; items without a positive are left out of the mean."""
    pairs_all = list(zip(z, y)) + (list(zip(ref_z, ref_y)) if ref_z is not None else [])
    logs = []
    for i in range(len(z)):
        others = [p for k, p in enumerate(pairs_all) if k != i]
        num = sum(math.exp(float(z[i] @ zk) / tau) for zk, yk in others if yk == y[i])
        den = sum(math.exp(float(z[i] @ zk) / tau) for zk, _ in others)
        if num > 0:
            logs.append(math.log(num / den))
    return -sum(logs) / len(logs)


def test_hand_computed():
    # cosines: s01=0, s02=0.6, s03=-1, s04=0, s12=0.8, s13=0, s14=-1,
    #          s23=-0.6, s24=-0.8, s34=0; tau = 1; z4 (label 2) has no positive:
    # it is left out of the mean but stays in the others' denominators.
    z = torch.tensor([[1., 0.], [0., 1.], [0.6, 0.8], [-1., 0.], [0., -1.]])
    y = torch.tensor([0, 0, 1, 1, 2])
    e = math.exp
    p0 = e(0) / (e(0) + e(0.6) + e(-1) + e(0))
    p1 = e(0) / (e(0) + e(0.8) + e(0) + e(-1))
    p2 = e(-0.6) / (e(0.6) + e(0.8) + e(-0.6) + e(-0.8))
    p3 = e(-0.6) / (e(-1) + e(0) + e(-0.6) + e(0))
    expected = -(math.log(p0) + math.log(p1) + math.log(p2) + math.log(p3)) / 4
    assert scalable_nca_loss(z, y, temperature=1.0).item() == pytest.approx(expected, rel=1e-6)
    assert ScalableNCALoss(temperature=1.0)(z, y).item() == pytest.approx(expected, rel=1e-6)


def test_hand_computed_with_memory():
    # Call 1 fills the memory with z0 (label 0); call 2: batch [z1 (label 0), z2 (label 1)]:
    # z1: positive z0 (s=0); others z2 (0.8)   -> p = 1 / (1 + e^0.8)
    # z2: no positive (z0 is label 0)          -> left out
    loss = ScalableNCALoss(temperature=1.0, memory_size=3, embed_dim=2)
    z = torch.tensor([[1., 0.], [0., 1.], [0.6, 0.8]])
    first = loss(z[:1], torch.tensor([0]))
    assert first.item() == 0
    second = loss(z[1:], torch.tensor([0, 1]))
    assert second.item() == pytest.approx(math.log(1 + math.exp(0.8)), rel=1e-6)


@pytest.mark.parametrize('tau', [0.05, 0.5])
def test_matches_loops_on_random_input(tau):
    g = torch.Generator().manual_seed(0)
    z = F.normalize(torch.randn(10, 6, generator=g, dtype=torch.float64), dim=1)
    y = torch.randint(0, 6, (10, ), generator=g)
    ref_z = F.normalize(torch.randn(8, 6, generator=g, dtype=torch.float64), dim=1)
    ref_y = torch.randint(0, 6, (8, ), generator=g)
    assert scalable_nca_loss(z, y, tau).item() == pytest.approx(brute_force(z, y, tau))
    assert scalable_nca_loss(z, y, tau, ref_z, ref_y).item() == pytest.approx(
        brute_force(z, y, tau, ref_z, ref_y))


def test_no_positive_anywhere_gives_connected_zero_and_finite_grads():
    z = F.normalize(torch.randn(4, 3), dim=1).requires_grad_()
    out = scalable_nca_loss(z, torch.arange(4))
    assert out.item() == 0
    out.backward()
    assert torch.equal(z.grad, torch.zeros_like(z))
    # mixed: rows without positives must not make the gradient NaN
    z.grad = None
    scalable_nca_loss(z, torch.tensor([0, 0, 1, 2])).backward()
    assert torch.isfinite(z.grad).all()


def test_gradcheck():
    raw = torch.randn(6, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64,
                      requires_grad=True)
    y = torch.tensor([0, 0, 1, 1, 2, 3])
    assert torch.autograd.gradcheck(
        lambda x: scalable_nca_loss(F.normalize(x, dim=1), y, 0.5), (raw, ))


def test_registry_and_bad_input():
    loss = MODELS.build(dict(type='ScalableNCALoss', memory_size=8, embed_dim=4))
    assert loss.memory.size == 8 and loss.temperature == 0.05
    with pytest.raises(ValueError, match='temperature'):
        ScalableNCALoss(temperature=-1)
    with pytest.raises(ValueError, match='ScalableNCALoss.*embed_dim'):
        ScalableNCALoss(memory_size=8)
