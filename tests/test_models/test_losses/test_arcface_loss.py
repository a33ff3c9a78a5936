import math
import time

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from irtbox.models.losses import (ArcFaceLoss, arcface_loss, arcface_target_logit,
                                  cosine_to_classes, normalized_softmax_loss)
from irtbox.models.losses.cosine import _CosineToClasses
from irtbox.registry import MODELS


def direct_arcface(z, y, w, margin, scale, easy_margin=False):
    """ArcFace written out with angles, float64: θ = acos(cos), target logit
    cos(θ + m) if θ + m < π else cos θ − m sin m (easy: cos(θ + m) if θ < π/2
    else cos θ); loss = mean(logsumexp(logits) − target logit)."""
    z, w = z.double(), w.double()
    cos = (z / z.norm(dim=1, keepdim=True)) @ (w / w.norm(dim=1, keepdim=True)).T
    losses = []
    for i in range(len(y)):
        c = cos[i]
        t = c[y[i]].clamp(-1 + 1e-7, 1 - 1e-7)
        theta = torch.acos(t)
        if easy_margin:
            phi = torch.cos(theta + margin) if theta < math.pi / 2 else t
        else:
            phi = torch.cos(theta + margin) if theta + margin < math.pi \
                else t - margin * math.sin(margin)
        target = F.one_hot(y[i], len(c)).bool()
        logits = scale * torch.where(target, phi, c)
        losses.append(torch.logsumexp(logits, 0) - logits[y[i]])
    return torch.stack(losses).mean()


def test_hand_computed():
    # weights (2, 0), (0, 3) normalise to e1, e2; z = (3, 4) -> (0.6, 0.8), label 1:
    # logits s*0.6 and s*cos(acos(0.8) + m); CE = log(1 + exp(s*0.6 - s*cos(acos 0.8 + m)))
    s, m = 10.0, 0.3
    loss = ArcFaceLoss(num_classes=2, embed_dim=2, margin=m, scale=s)
    with torch.no_grad():
        loss.class_weights.copy_(torch.tensor([[2., 0.], [0., 3.]]))
    out = loss(torch.tensor([[3., 4.]]), torch.tensor([1]))
    target = 0.8 * math.cos(m) - 0.6 * math.sin(m)  # cos(θ + m), cos θ = 0.8, sin θ = 0.6
    assert out.item() == pytest.approx(math.log1p(math.exp(s * 0.6 - s * target)), rel=1e-6)


@pytest.mark.parametrize('easy_margin', [False, True])
def test_matches_direct_formula(easy_margin):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(12, 8, generator=g, dtype=torch.float64)
    w = torch.randn(6, 8, generator=g, dtype=torch.float64) * 3
    y = torch.randint(0, 6, (12, ), generator=g)
    # two targets on the far side (θ near π: the θ + m > π fallback), one orthogonal-ish
    z[0], z[1] = -w[y[0]], -w[y[1]] + 0.05 * torch.randn(8, generator=g, dtype=torch.float64)
    for margin in (0.15, 0.5, 1.2):
        expected = direct_arcface(z, y, w, margin, 30.0, easy_margin)
        got = arcface_loss(z, y, w, margin, 30.0, easy_margin)
        assert got.item() == pytest.approx(expected.item(), rel=1e-9)


def test_fallback_branch_is_used():
    m = 0.5
    cos = torch.tensor([math.cos(math.pi - m) + 1e-3, math.cos(math.pi - m) - 1e-3, -1.0],
                       dtype=torch.float64)
    phi = arcface_target_logit(cos, m)
    theta = torch.acos(cos[0])
    assert phi[0].item() == pytest.approx(torch.cos(theta + m).item(), abs=1e-9)
    assert phi[1].item() == pytest.approx(cos[1].item() - m * math.sin(m), abs=1e-12)
    assert phi[2].item() == pytest.approx(-1 + 1e-7 - m * math.sin(m), abs=1e-12)
    # easy margin: no margin where cos θ <= 0
    easy = arcface_target_logit(torch.tensor([-0.3, 0.6], dtype=torch.float64), m, True)
    assert easy[0].item() == pytest.approx(-0.3)
    assert easy[1].item() == pytest.approx(math.cos(math.acos(0.6) + m))


def test_margin_zero_is_normalized_softmax():
    g = torch.Generator().manual_seed(1)
    z, w = torch.randn(10, 16, generator=g), torch.randn(7, 16, generator=g)
    y = torch.randint(0, 7, (10, ), generator=g)
    for s in (1.0, 30.0, 64.0):
        expected = normalized_softmax_loss(z, y, w, temperature=1 / s)
        assert arcface_loss(z, y, w, 0.0, s).item() == pytest.approx(expected.item(), rel=1e-5)


def test_cosine_gradcheck():
    g = torch.Generator().manual_seed(2)
    x = F.normalize(torch.randn(5, 7, generator=g, dtype=torch.float64), dim=1)
    w = torch.randn(9, 7, generator=g, dtype=torch.float64)
    x.requires_grad_(True)
    w.requires_grad_(True)
    assert torch.autograd.gradcheck(_CosineToClasses.apply, (x, w))


def test_gradients_match_autograd_of_direct_formula():
    g = torch.Generator().manual_seed(3)
    z0 = torch.randn(8, 6, generator=g, dtype=torch.float64)
    w0 = torch.randn(5, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (8, ), generator=g)
    grads = []
    for fn in (arcface_loss, direct_arcface):
        z, w = z0.clone().requires_grad_(True), w0.clone().requires_grad_(True)
        fn(z, y, w, 0.3, 16.0).backward()
        grads.append((z.grad, w.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-7, atol=1e-10)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-7, atol=1e-10)
    assert cosine_to_classes(z0, w0).shape == (8, 5)


class LargeTensors(TorchDispatchMode):
    """Records every op output of at least ``numel`` elements that is new
    storage (not a view of, or in place on, an input)."""

    def __init__(self, numel):
        super().__init__()
        self.numel = numel
        self.created = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.numel() >= self.numel \
                    and t.untyped_storage().data_ptr() not in inputs:
                self.created.append((str(func), tuple(t.shape)))
        return out


def test_memory_detector_sees_a_normalised_copy():
    # the check below can fail: normalising W the usual way creates C x D tensors
    w = torch.randn(300, 40, requires_grad=True)
    with LargeTensors(300 * 40) as mode:
        (F.normalize(torch.randn(4, 40), dim=1) @ F.normalize(w, dim=1).T).sum().backward()
    assert len(mode.created) > 1


@pytest.mark.slow
def test_no_class_matrix_copy_at_gldv2_size():
    # GLDv2-clean: 81,313 classes x 1536; batch 4. Forward: no C x D tensor at all;
    # backward: exactly one, the weight gradient itself.
    num_classes, dim = 81313, 1536
    loss = ArcFaceLoss(num_classes, dim)
    z = torch.randn(4, dim, requires_grad=True)
    y = torch.tensor([0, 5, 81312, 40000])
    start = time.perf_counter()
    with LargeTensors(num_classes * dim) as mode:
        out = loss(z, y)
        assert mode.created == []
        out.backward()
    assert mode.created == [('aten.mm.default', (num_classes, dim))]
    assert loss.class_weights.grad.shape == (num_classes, dim)
    assert torch.isfinite(out) and z.grad.abs().sum() > 0
    assert time.perf_counter() - start < 30


def test_class_weights_parameter_and_build():
    loss = MODELS.build(dict(type='ArcFaceLoss', num_classes=3, embed_dim=4))
    assert [n for n, _ in loss.named_parameters()] == ['class_weights']
    assert (loss.margin, loss.scale, loss.easy_margin) == (0.15, 30.0, False)
    loss(torch.randn(4, 4), torch.tensor([0, 1, 2, 0])).backward()
    assert loss.class_weights.grad.abs().sum() > 0
    # half-precision embeddings are computed in float32
    assert loss(torch.randn(2, 4).half(), torch.tensor([0, 1])).dtype == torch.float32


def test_bad_inputs():
    loss = ArcFaceLoss(num_classes=3, embed_dim=4)
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 3\).*\[0, 3\]'):
        loss(torch.randn(2, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match='embed_dim=4'):
        loss(torch.randn(2, 5), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='margin'):
        ArcFaceLoss(num_classes=3, embed_dim=4, margin=2.0)
    with pytest.raises(ValueError, match='scale'):
        ArcFaceLoss(num_classes=3, embed_dim=4, scale=0)
    with pytest.raises(ValueError, match='num_classes'):
        ArcFaceLoss(num_classes=0, embed_dim=4)
