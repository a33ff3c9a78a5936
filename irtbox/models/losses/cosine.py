"""Cosines between embeddings and class centres without copying the C x D centres: the
one computation of every loss with one centre per class (ArcFace, CosFace, normalised
softmax, replicated or sharded by Partial FC)."""
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ['cosine_to_classes', 'margin_softmax_loss']

# Lower bound of the class-weight norms (as F.normalize).
_NORM_EPS = 1e-12


class _CosineToClasses(torch.autograd.Function):
    """cos_ij = <x_i, w_j> / ‖w_j‖ for unit rows x_i, without a normalised copy
    of W in the forward or the backward pass.

    Backward (G = dL/dcos, B x C; A = G / ‖w_j‖ column-wise):
    dL/dx = A W;  dL/dw_j = Σ_i A_ij x_i − (Σ_i A_ij cos_ij) w_j / ‖w_j‖.
    The second term is added in place into the C x D gradient (``addcmul_``),
    so the only C x D tensor created is the gradient itself.
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor) -> Tensor:
        norms = torch.linalg.vector_norm(weight, dim=1).clamp_min_(_NORM_EPS)
        cos = (x @ weight.T).div_(norms)
        ctx.save_for_backward(x, weight, norms, cos)
        return cos

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight, norms, cos = ctx.saved_tensors
        scaled = grad / norms
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = scaled @ weight
        if ctx.needs_input_grad[1]:
            grad_w = scaled.T @ x
            coef = (scaled * cos).sum(0).div_(norms)
            grad_w.addcmul_(coef[:, None], weight, value=-1.0)
        return grad_x, grad_w


def cosine_to_classes(embeddings: Tensor, class_weights: Tensor) -> Tensor:
    """Cosine similarity of every embedding with every class weight.

    Args:
        embeddings (Tensor): B x D (normalised here).
        class_weights (Tensor): C x D, used as they are (never copied):
            the dot products are divided by the C row norms.

    Returns:
        Tensor: B x C cosines.
    """
    return _CosineToClasses.apply(F.normalize(embeddings, dim=1), class_weights)


def margin_softmax_loss(embeddings: Tensor, labels: Tensor, class_weights: Tensor,
                        target_logit: Callable[[Tensor], Tensor], scale: float) -> Tensor:
    """Cross-entropy of the logits s·cos θ_ij for j ≠ y_i and s·target_logit(cos θ_iy) for the
    target (cosines of :func:`cosine_to_classes`), mean over the batch: the form of ArcFace,
    CosFace and the normalised softmax. Only the B target entries go through ``target_logit``."""
    cos = cosine_to_classes(embeddings, class_weights)
    target = labels[:, None]
    logits = cos.scatter(1, target, target_logit(cos.gather(1, target))).mul_(scale)
    return F.cross_entropy(logits, labels)
