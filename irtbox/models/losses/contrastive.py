"""Contrastive loss with a margin on negatives (IRT Eq. 1), optionally with XBM."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from irtbox.registry import MODELS
from .xbm import MemoryPairLoss

__all__ = ['ContrastiveLoss', 'contrastive_loss']


def contrastive_loss(embeddings: Tensor, labels: Tensor, margin: float = 0.5,
                     ref_embeddings: Optional[Tensor] = None,
                     ref_labels: Optional[Tensor] = None) -> Tensor:
    """IRT Eq. 1 over the batch and, optionally, extra reference entries.

    L = (1/N) Σ_i [ Σ_{j: y_j = y_i, j≠i} (1 − z_iᵀz_j)_+
                    + Σ_{j: y_j ≠ y_i} (z_iᵀz_j − β)_+ ]

    j runs over the other batch items and over every reference entry (e.g.
    the cross-batch memory); N is the batch size in any case. Reference
    entries are other samples, so none of them is excluded as "self".

    Args:
        embeddings (Tensor): N x D, L2-normalised.
        labels (Tensor): N integer labels.
        margin (float): β.
        ref_embeddings (Tensor, optional): M x D, L2-normalised.
        ref_labels (Tensor, optional): M integer labels.

    Returns:
        Tensor: scalar.
    """
    n = embeddings.shape[0]
    not_self = ~torch.eye(n, dtype=torch.bool, device=embeddings.device)
    total = _pair_terms(embeddings @ embeddings.T, labels[:, None] == labels[None],
                        margin, not_self)
    if ref_embeddings is not None:
        total = total + _pair_terms(embeddings @ ref_embeddings.T,
                                    labels[:, None] == ref_labels[None], margin)
    return total / n


def _pair_terms(sim: Tensor, same: Tensor, margin: float,
                valid: Optional[Tensor] = None) -> Tensor:
    """Sum of the positive and negative terms of Eq. 1 over the valid pairs of ``sim``."""
    pos, neg = same, ~same
    if valid is not None:
        pos, neg = pos & valid, neg & valid
    # 1 - sim can be a rounding error below 0 for identical unit vectors: keep the ( )_+.
    return (F.relu(1 - sim) * pos).sum() + (F.relu(sim - margin) * neg).sum()


@MODELS.register_module()
class ContrastiveLoss(MemoryPairLoss):
    """Contrastive loss of IRT (El-Nouby et al. 2021, Eq. 1) with cross-batch memory.

    Positive pairs are pulled to similarity 1; negative pairs are pushed while their cosine
    exceeds the margin β (:func:`contrastive_loss`).

    Cross-batch memory (Wang et al. 2020, "XBM"; IRT uses a queue the size of the training
    set): with ``memory_size > 0`` the j range of Eq. 1 covers batch ∪ memory, one sum
    normalised by N, i.e. XBM's loss(batch, batch) + loss(batch, memory)
    (:class:`~irtbox.models.losses.xbm.CrossBatchMemory`).

    Shapes: ``embeddings`` B x D (L2-normalised), ``labels`` B (integer),
    ``memory_embeddings`` B x D or None -> scalar.

    Args:
        margin (float): β, the similarity above which negatives count. IRT:
            0.5 (category level), 0.85 (particular objects). Defaults to 0.5.
        memory_size (int): XBM queue size; 0 (default) = no memory.
        embed_dim (int, optional): D; required when ``memory_size > 0``.
        memory_start_iter (int): XBM warm-up: the memory is neither read nor filled during the first
            ``memory_start_iter`` training calls. Defaults to 0.
    """

    def __init__(self, margin: float = 0.5, memory_size: int = 0,
                 embed_dim: Optional[int] = None, memory_start_iter: int = 0) -> None:
        super().__init__(memory_size, embed_dim, memory_start_iter)
        self.margin = float(margin)

    def pair_loss(self, embeddings: Tensor, labels: Tensor, ref_embeddings=None,
                  ref_labels=None) -> Tensor:
        return contrastive_loss(embeddings, labels, self.margin, ref_embeddings, ref_labels)

    def extra_repr(self) -> str:
        return f'margin={self.margin}'
