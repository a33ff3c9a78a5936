"""CosFace (Wang et al. 2018): softmax cross-entropy with an additive cosine margin on the
target class. The one CosFace formula of irtbox, :func:`cosface_loss`, equal to PyTorch
Metric Learning's ``CosFaceLoss`` on the same weights (tested)."""
from typing import Optional

from torch import Tensor

from irtbox.registry import MODELS
from irtbox.utils.checks import check_number
from .class_weights import ClassWeightLoss
from .cosine import margin_softmax_loss

__all__ = ['CosFaceLoss', 'cosface_loss']


def cosface_loss(embeddings: Tensor, labels: Tensor, class_weights: Tensor, margin: float = 0.35,
                 scale: float = 64.0) -> Tensor:
    """CosFace loss, mean over the batch (Wang et al., CVPR 2018, Eq. 4).

    logits_ij = s·cos θ_ij for j ≠ y_i and s·(cos θ_iy − m) for the target, θ_ij the
    angle between embedding i and class weight j; then cross-entropy.

    Args:
        embeddings (Tensor): B x D (normalised here).
        labels (Tensor): B class indices in [0, C).
        class_weights (Tensor): C x D (normalised implicitly, never copied).
        margin (float): m, subtracted from the target cosine.
        scale (float): s.

    Returns:
        Tensor: scalar.
    """
    return margin_softmax_loss(embeddings, labels, class_weights, lambda cos: cos - margin, scale)


@MODELS.register_module()
class CosFaceLoss(ClassWeightLoss):
    """CosFace, large margin cosine loss (Wang et al., "CosFace: Large Margin Cosine Loss
    for Deep Face Recognition", CVPR 2018, Eq. 4): logits s·cos θ_j for the other classes
    and s·(cos θ_y − m) for the target, then softmax cross-entropy. PML's ``CosFaceLoss``
    (same defaults), with the class weights stored C x D as ``class_weights``.

    Shapes: ``embeddings`` B x D, ``labels`` B in [0, num_classes) -> scalar.

    Args:
        num_classes, embed_dim, partial_fc: C, D and the sharding, see
            :class:`.class_weights.ClassWeightLoss`.
        margin (float): m >= 0, a cosine margin. Defaults to 0.35.
        scale (float): s > 0. Defaults to 64.
    """

    def __init__(self, num_classes: int, embed_dim: int, margin: float = 0.35,
                 scale: float = 64.0, partial_fc: Optional[dict] = None) -> None:
        super().__init__(num_classes, embed_dim, partial_fc)
        self.margin = check_number(margin, 'CosFaceLoss: margin')
        self.scale = check_number(scale, 'CosFaceLoss: scale', strict=True)

    @property
    def logit_scale(self) -> float:
        return self.scale

    def target_logit(self, cos: Tensor) -> Tensor:
        return cos - self.margin

    def extra_repr(self) -> str:
        return f'{self.class_weights_repr()}, margin={self.margin}, scale={self.scale}'
