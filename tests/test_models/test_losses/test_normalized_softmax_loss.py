import math

import pytest
import torch
import torch.nn.functional as F

from irtbox.models.losses import NormalizedSoftmaxLoss, normalized_softmax_loss
from irtbox.registry import MODELS


def test_hand_computed():
    # proxies (2, 0) and (0, 3) normalise to e1, e2; z = (0.6, 0.8), label 1, tau = 0.5:
    # logits = (1.2, 1.6); CE = -log(e^1.6 / (e^1.2 + e^1.6)) = log(1 + e^-0.4)
    loss = NormalizedSoftmaxLoss(num_classes=2, embed_dim=2, temperature=0.5)
    with torch.no_grad():
        loss.class_weights.copy_(torch.tensor([[2., 0.], [0., 3.]]))
    # the embedding is normalised too: (3, 4) is (0.6, 0.8)
    out = loss(torch.tensor([[3., 4.]]), torch.tensor([1]))
    assert out.item() == pytest.approx(math.log(1 + math.exp(-0.4)))


def test_matches_cross_entropy_on_random_input():
    g = torch.Generator().manual_seed(0)
    loss = NormalizedSoftmaxLoss(num_classes=5, embed_dim=8, temperature=0.05)
    z = torch.randn(10, 8, generator=g)
    y = torch.randint(0, 5, (10, ), generator=g)
    w = loss.class_weights.detach()
    cos = torch.stack([F.cosine_similarity(z, w[c].expand_as(z), dim=1) for c in range(5)], 1)
    expected = F.cross_entropy(cos / 0.05, y)
    assert loss(z, y).item() == pytest.approx(expected.item(), rel=1e-5)
    assert normalized_softmax_loss(z, y, w, 0.05).item() == pytest.approx(expected.item(),
                                                                          rel=1e-5)


def test_class_weights_are_a_trained_parameter():
    loss = MODELS.build(dict(type='NormalizedSoftmaxLoss', num_classes=3, embed_dim=4))
    assert [n for n, _ in loss.named_parameters()] == ['class_weights']
    assert loss.class_weights.shape == (3, 4)
    loss(torch.randn(4, 4), torch.tensor([0, 1, 2, 0])).backward()
    assert loss.class_weights.grad is not None and loss.class_weights.grad.abs().sum() > 0


def test_bad_inputs():
    loss = NormalizedSoftmaxLoss(num_classes=3, embed_dim=4)
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 3\).*\[0, 3\]'):
        loss(torch.randn(2, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match='embed_dim=4'):
        loss(torch.randn(2, 5), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='temperature'):
        NormalizedSoftmaxLoss(num_classes=3, embed_dim=4, temperature=0)
    with pytest.raises(ValueError, match='num_classes'):
        NormalizedSoftmaxLoss(num_classes=0, embed_dim=4)
