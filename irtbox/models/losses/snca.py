"""Scalable neighbourhood component analysis (Wu, Efros & Yu, ECCV 2018) with a FIFO memory."""
from typing import Optional

import torch
from torch import Tensor

from irtbox.registry import MODELS
from irtbox.utils.checks import check_number
from .xbm import MemoryPairLoss

__all__ = ['ScalableNCALoss', 'scalable_nca_loss']


def scalable_nca_loss(embeddings: Tensor, labels: Tensor, temperature: float = 0.05,
                      ref_embeddings: Optional[Tensor] = None,
                      ref_labels: Optional[Tensor] = None) -> Tensor:
    """NCA loss over the batch and, optionally, extra reference entries.

    p_i = Σ_{j≠i, y_j = y_i} exp(z_iᵀz_j / τ) / Σ_{k≠i} exp(z_iᵀz_k / τ),
    L = −(1/N') Σ_{i with a positive} log p_i

    j, k run over the other batch items and every reference entry. Items
    without any positive have p_i = 0 (log undefined) and are left out; N' is
    the number of items kept, so the loss does not shrink with the share of
    such items. With no item kept the loss is a zero connected to the graph.

    Args:
        embeddings (Tensor): N x D, L2-normalised.
        labels (Tensor): N integer labels.
        temperature (float): τ.
        ref_embeddings (Tensor, optional): M x D, L2-normalised.
        ref_labels (Tensor, optional): M integer labels.

    Returns:
        Tensor: scalar.
    """
    n = embeddings.shape[0]
    is_self = torch.eye(n, dtype=torch.bool, device=embeddings.device)
    logits = (embeddings @ embeddings.T).masked_fill(is_self, float('-inf'))
    positive = (labels[:, None] == labels[None]) & ~is_self
    if ref_embeddings is not None:
        logits = torch.cat([logits, embeddings @ ref_embeddings.T], dim=1)
        positive = torch.cat([positive, labels[:, None] == ref_labels[None]], dim=1)
    keep = positive.any(dim=1)
    if not keep.any():
        return embeddings.sum() * 0
    # Rows without a positive are dropped first: their numerator would be a
    # logsumexp of only -inf, whose backward is NaN even when masked out later.
    logits, positive = logits[keep] / temperature, positive[keep]
    log_p = (torch.logsumexp(logits.masked_fill(~positive, float('-inf')), dim=1)
             - torch.logsumexp(logits, dim=1))
    return -log_p.mean()


@MODELS.register_module()
class ScalableNCALoss(MemoryPairLoss):
    """Scalable NCA (Wu, Efros & Yu, "Improving Generalization via Scalable
    Neighborhood Component Analysis", ECCV 2018); IRT Table 4 "SNCA".

    Soft nearest-neighbour classification: L = −mean_i log p_i, p_i the softmax probability
    (cosine / τ) that item i picks a same-label neighbour among the batch and the memory
    (:func:`scalable_nca_loss`).

    Deviation from the paper: SNCA keeps one memory slot per training sample, updated with
    momentum by sample index; the loss API has no sample indices, so the memory is the FIFO
    queue of :class:`ContrastiveLoss` (:class:`~irtbox.models.losses.xbm.MemoryPairLoss`).

    Shapes: ``embeddings`` B x D (L2-normalised), ``labels`` B (integer),
    ``memory_embeddings`` B x D or None -> scalar.

    Args:
        temperature (float): τ. Defaults to 0.05 (as in SNCA).
        memory_size (int): queue size; 0 (default) = batch only.
        embed_dim (int, optional): D; required when ``memory_size > 0``.
        memory_start_iter (int): warm-up training calls without memory. Defaults to 0.
    """

    def __init__(self, temperature: float = 0.05, memory_size: int = 0,
                 embed_dim: Optional[int] = None, memory_start_iter: int = 0) -> None:
        super().__init__(memory_size, embed_dim, memory_start_iter)
        self.temperature = check_number(temperature, 'ScalableNCALoss: temperature', strict=True)

    def pair_loss(self, embeddings: Tensor, labels: Tensor, ref_embeddings=None,
                  ref_labels=None) -> Tensor:
        return scalable_nca_loss(embeddings, labels, self.temperature, ref_embeddings,
                                 ref_labels)

    def extra_repr(self) -> str:
        return f'temperature={self.temperature}'
