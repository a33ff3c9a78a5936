import math

import pytest
import torch
import torch.nn.functional as F

from irtbox.models.losses import ContrastiveLoss, contrastive_loss
from irtbox.registry import MODELS

# Four unit vectors in 2-D; pairwise cosines:
# s01 = 0, s02 = 0.6, s03 = -1, s12 = 0.8, s13 = 0, s23 = -0.6
Z = torch.tensor([[1., 0.], [0., 1.], [0.6, 0.8], [-1., 0.]])
Y = torch.tensor([0, 0, 1, 1])


def brute_force(z, y, margin, ref_z=None, ref_y=None):
    """Eq. 1 with explicit loops (j over batch minus i, then over the references)."""
    total = 0.0
    n = len(z)
    others = [(z[j], y[j]) for j in range(n)]
    for i in range(n):
        pairs = [p for j, p in enumerate(others) if j != i]
        if ref_z is not None:
            pairs += list(zip(ref_z, ref_y))
        for zj, yj in pairs:
            s = float(z[i] @ zj)
            total += max(0.0, 1 - s) if yj == y[i] else max(0.0, s - margin)
    return total / n


def test_hand_computed():
    # i=0: pos 1-0=1;    neg (0.6-0.5)=0.1, (-1-0.5)_+=0      -> 1.1
    # i=1: pos 1-0=1;    neg (0.8-0.5)=0.3, (0-0.5)_+=0       -> 1.3
    # i=2: pos 1+0.6=1.6; neg 0.1, 0.3                        -> 2.0
    # i=3: pos 1.6;      neg (-1-0.5)_+=0, (0-0.5)_+=0        -> 1.6
    # (1.1 + 1.3 + 2.0 + 1.6) / 4 = 1.5
    assert contrastive_loss(Z, Y, margin=0.5).item() == pytest.approx(1.5)
    assert ContrastiveLoss(margin=0.5)(Z, Y).item() == pytest.approx(1.5)
    # margin 0: positives as above (1 + 1 + 1.6 + 1.6 = 5.2); negatives with s > 0
    # are s02 = 0.6 and s12 = 0.8, each counted from both ends: 2 * 1.4.
    assert contrastive_loss(Z, Y, margin=0.0).item() == pytest.approx((5.2 + 2 * 1.4) / 4)


def test_hand_computed_with_memory():
    loss = ContrastiveLoss(margin=0.5, memory_size=4, embed_dim=2)
    # Call 1: batch [z0 (y0), z2 (y1)], empty memory: one negative each, 0.6-0.5.
    first = loss(Z[[0, 2]], Y[[0, 2]])
    assert first.item() == pytest.approx((0.1 + 0.1) / 2)
    # Call 2: batch [z1 (y0), z3 (y1)], memory [z0, z2].
    # batch pairs: s13 = 0 < margin -> 0.
    # z1: memory z0 positive 1-0=1; z2 negative 0.8-0.5=0.3
    # z3: memory z0 negative (-1-0.5)_+=0; z2 positive 1+0.6=1.6
    second = loss(Z[[1, 3]], Y[[1, 3]])
    assert second.item() == pytest.approx((1 + 0.3 + 1.6) / 2)


@pytest.mark.parametrize('margin', [0.0, 0.3, 0.5, 0.85])
def test_matches_loops_on_random_input(margin):
    g = torch.Generator().manual_seed(0)
    z = F.normalize(torch.randn(12, 8, generator=g, dtype=torch.float64), dim=1)
    y = torch.randint(0, 4, (12, ), generator=g)
    ref_z = F.normalize(torch.randn(7, 8, generator=g, dtype=torch.float64), dim=1)
    ref_y = torch.randint(0, 4, (7, ), generator=g)
    assert contrastive_loss(z, y, margin).item() == pytest.approx(brute_force(z, y, margin))
    assert contrastive_loss(z, y, margin, ref_z, ref_y).item() == pytest.approx(
        brute_force(z, y, margin, ref_z, ref_y))


def test_memory_term_is_batch_term_plus_memory_term():
    """The single sum over batch ∪ memory equals XBM's loss(batch) + loss(batch, memory)."""
    g = torch.Generator().manual_seed(1)
    z = F.normalize(torch.randn(6, 5, generator=g), dim=1)
    y = torch.randint(0, 3, (6, ), generator=g)
    loss = ContrastiveLoss(margin=0.2, memory_size=10, embed_dim=5)
    loss(z[:3], y[:3])  # memory now holds z[:3]
    memory_term = sum(
        max(0.0, 1 - float(z[i] @ z[m])) if y[i] == y[m] else max(0.0, float(z[i] @ z[m]) - 0.2)
        for i in range(3, 6) for m in range(3)) / 3
    expected = contrastive_loss(z[3:], y[3:], 0.2).item() + memory_term
    assert loss(z[3:], y[3:]).item() == pytest.approx(expected, rel=1e-5)


def test_identical_positive_gives_zero_positive_term():
    # 1 - z.z can round below 0 for a duplicate: the ( )_+ keeps it at exactly >= 0.
    z = F.normalize(torch.tensor([[0.3, 0.7, 0.1], [0.3, 0.7, 0.1]]), dim=1)
    out = contrastive_loss(z, torch.tensor([5, 5]))
    assert out.item() >= 0
    assert out.item() == pytest.approx(0, abs=1e-6)


def test_gradcheck():
    g = torch.Generator().manual_seed(2)
    raw = torch.randn(6, 3, generator=g, dtype=torch.float64, requires_grad=True)
    ref = F.normalize(torch.randn(4, 3, generator=g, dtype=torch.float64), dim=1)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    ref_y = torch.tensor([0, 1, 2, 3])
    assert torch.autograd.gradcheck(
        lambda x: contrastive_loss(F.normalize(x, dim=1), y, 0.1, ref, ref_y), (raw, ))


def test_build_from_registry_and_repr():
    loss = MODELS.build(dict(type='ContrastiveLoss', margin=0.85))
    assert isinstance(loss, ContrastiveLoss) and loss.margin == 0.85
    assert loss.memory is None
    assert 'margin=0.85' in repr(loss)


def test_bad_inputs():
    with pytest.raises(ValueError, match='embed_dim'):
        ContrastiveLoss(memory_size=10)
    with pytest.raises(ValueError, match='memory_size'):
        ContrastiveLoss(memory_size=-1)
    loss = ContrastiveLoss(memory_size=4, embed_dim=3)
    with pytest.raises(ValueError, match='ContrastiveLoss.*embed_dim=3'):
        loss(Z, Y)
    with pytest.raises(ValueError, match='ContrastiveLoss: labels'):
        ContrastiveLoss()(Z, Y.float())
    with pytest.raises(ValueError, match='ContrastiveLoss: labels'):
        ContrastiveLoss()(Z, Y[:3])
    with pytest.raises(ValueError, match='ContrastiveLoss: embeddings'):
        ContrastiveLoss()(Z[0], Y[:1])
    with pytest.raises(ValueError, match='memory_size=0'):
        ContrastiveLoss()(Z, Y, memory_embeddings=Z)


def test_eq1_scale():
    """N normalises: duplicating the batch doubles the pairs per item (sum, not mean)."""
    single = contrastive_loss(Z, Y).item()
    double = contrastive_loss(torch.cat([Z, Z]), torch.cat([Y, Y])).item()
    # each item also meets a copy of every other item (+ its own copy, loss 0)
    assert double == pytest.approx(2 * single)
    assert not math.isclose(single, 0)
