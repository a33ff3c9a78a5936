import math

import pytest
import torch

from irtbox.models.losses import TupleContrastiveLoss, tuple_contrastive_loss


def test_hand_computed_tuple():
    # One tuple in 2-D: q = (1, 0), p = (0, 1), negatives n1 = (1, 0) and n2 = (-1, 0), margin 0.85.
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [-1.0, 0.0]])
    eps = 1e-6
    d_p = math.hypot(1 + eps, -1 + eps)          # q - p = (1, -1), + eps
    d_n1 = math.hypot(eps, eps)                  # q - n1 = (0, 0)
    d_n2 = math.hypot(2 + eps, eps)              # q - n2 = (2, 0): beyond the margin, no loss
    expected = 0.5 * d_p ** 2 + 0.5 * (0.85 - d_n1) ** 2 + 0.5 * max(0.0, 0.85 - d_n2) ** 2
    loss = TupleContrastiveLoss(margin=0.85, num_negatives=2)(emb, torch.zeros(4, dtype=torch.long))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_sum_over_tuples_matches_loop():
    torch.manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(3 * 7, 8, dtype=torch.float64), dim=1)
    expected = 0.0
    for t in range(3):
        q = emb[7 * t]
        for j in range(1, 7):
            d = (q - emb[7 * t + j] + 1e-6).norm()
            expected += 0.5 * d ** 2 if j == 1 else 0.5 * torch.clamp(0.7 - d, min=0) ** 2
    torch.testing.assert_close(tuple_contrastive_loss(emb, 5, 0.7), expected)


def test_layout_errors():
    with pytest.raises(ValueError, match='multiple of the tuple size'):
        TupleContrastiveLoss()(torch.randn(8, 4), torch.zeros(8, dtype=torch.long))
