"""ArcFace (Deng et al. 2019): softmax cross-entropy with an additive angular
margin on the target class, with class weights that may be very large.

The one ArcFace formula of irtbox: :func:`arcface_loss` serves both the
registered :class:`ArcFaceLoss` (C x D ``class_weights``, margin in radians;
IRT / DToP) and ``PMLLoss(name='ArcFaceLoss')`` (PML's form, see
:mod:`.pml_equivalents`; the training-recipe benchmark)."""
import math
from typing import Optional

import torch
from torch import Tensor

from irtbox.registry import MODELS
from irtbox.utils.checks import check_number
from .class_weights import ClassWeightLoss
from .cosine import margin_softmax_loss

__all__ = ['ArcFaceLoss', 'arcface_loss', 'arcface_target_logit']

# Target cosines are clamped to [-1 + eps, 1 - eps] before sin θ = sqrt(1 - cos²θ):
# the derivative of the square root is infinite at sin θ = 0.
_COS_EPS = 1e-7


def arcface_target_logit(cos: Tensor, margin: float, easy_margin: bool = False) -> Tensor:
    """cos(θ + m) for target cosines ``cos`` = cos θ, elementwise (ArcFace Eq. 3).

    cos(θ + m) = cos θ cos m − sin θ sin m, with cos θ clamped to [−1 + 1e-7, 1 − 1e-7] so that
    sin θ = sqrt(1 − cos²θ) has a finite derivative. Where θ + m would exceed π, cos(θ + m)
    would increase again with θ (the margin would reward larger angles), so the usual fallback
    ("th/mm" in the InsightFace implementation) is used: if cos θ <= cos(π − m), the logit is
    cos θ − m sin m, a linear continuation below the angular one. With ``easy_margin`` the
    margin applies only where cos θ > 0 (elsewhere cos θ itself).
    """
    cos = cos.clamp(-1.0 + _COS_EPS, 1.0 - _COS_EPS)
    sin = torch.sqrt(1.0 - cos * cos)
    shifted = cos * math.cos(margin) - sin * math.sin(margin)
    if easy_margin:
        return torch.where(cos > 0, shifted, cos)
    return torch.where(cos > math.cos(math.pi - margin), shifted, cos - margin * math.sin(margin))


def arcface_loss(embeddings: Tensor, labels: Tensor, class_weights: Tensor, margin: float = 0.15,
                 scale: float = 30.0, easy_margin: bool = False) -> Tensor:
    """ArcFace loss, mean over the batch (Deng et al., CVPR 2019, Eq. 3).

    logits_ij = s·cos θ_ij for j ≠ y_i and s·cos(θ_iy + m) for the target,
    θ_ij the angle between embedding i and class weight j; then
    cross-entropy. Only the B target entries go through the margin.

    Args:
        embeddings (Tensor): B x D (normalised here).
        labels (Tensor): B class indices in [0, C).
        class_weights (Tensor): C x D (normalised implicitly, never copied).
        margin (float): m, in radians.
        scale (float): s.
        easy_margin (bool): see :func:`arcface_target_logit`.

    Returns:
        Tensor: scalar.
    """
    return margin_softmax_loss(embeddings, labels, class_weights,
                               lambda cos: arcface_target_logit(cos, margin, easy_margin), scale)


@MODELS.register_module()
class ArcFaceLoss(ClassWeightLoss):
    """ArcFace, additive angular margin loss (Deng et al., "ArcFace: Additive
    Angular Margin Loss for Deep Face Recognition", CVPR 2019, Eq. 3); the
    training loss of DToP (margin 0.15) and of Yokoo et al. 2020.

    One weight vector per training class, the parameter ``class_weights`` (C x D, initialised like
    ``nn.Linear``; its own lr through ``paramwise_cfg=dict(custom_keys={'class_weights': ...})``).
    Logits s·cos θ_j for the other classes and s·cos(θ_y + m) for the target, then softmax
    cross-entropy; m = 0 is the normalised softmax with temperature 1/s. The class matrix is never
    copied (:class:`.cosine._CosineToClasses`): besides it and its gradient, only B x C tensors.

    Shapes: ``embeddings`` B x D, ``labels`` B in [0, num_classes) -> scalar.

    Args:
        num_classes, embed_dim, partial_fc: C, D and the sharding, see
            :class:`.class_weights.ClassWeightLoss`.
        margin (float): m in radians, in [0, π/2). Defaults to 0.15 (DToP).
        scale (float): s > 0. Defaults to 30 (DToP does not state it; 30 is
            the value of the closest prior work, Yokoo et al. 2020).
        easy_margin (bool): Apply the margin only to targets with cos θ > 0
            instead of the θ + m > π fallback. Defaults to False.
    """

    def __init__(self, num_classes: int, embed_dim: int, margin: float = 0.15,
                 scale: float = 30.0, easy_margin: bool = False,
                 partial_fc: Optional[dict] = None) -> None:
        super().__init__(num_classes, embed_dim, partial_fc)
        if not 0 <= margin < math.pi / 2:
            raise ValueError(f'ArcFaceLoss: margin must be in [0, pi/2) radians, got {margin!r}')
        self.margin = float(margin)
        self.scale = check_number(scale, 'ArcFaceLoss: scale', strict=True)
        self.easy_margin = bool(easy_margin)

    @property
    def logit_scale(self) -> float:
        return self.scale

    def target_logit(self, cos: Tensor) -> Tensor:
        return arcface_target_logit(cos, self.margin, self.easy_margin)

    def extra_repr(self) -> str:
        return (f'{self.class_weights_repr()}, margin={self.margin}, '
                f'scale={self.scale}, easy_margin={self.easy_margin}')
