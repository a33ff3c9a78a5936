"""Normalized softmax (Zhai & Wu 2018): classification with cosine logits.

The one formula of irtbox for it: :func:`normalized_softmax_loss` serves both
the registered :class:`NormalizedSoftmaxLoss` (C x D ``class_weights``; IRT)
and ``PMLLoss(name='NormalizedSoftmaxLoss')`` (PML's form, see
:mod:`.pml_equivalents`; the training-recipe benchmark)."""
from typing import Optional

import torch.nn.functional as F
from torch import Tensor

from irtbox.registry import MODELS
from irtbox.utils.checks import check_number
from .class_weights import ClassWeightLoss

__all__ = ['NormalizedSoftmaxLoss', 'normalized_softmax_loss']


def normalized_softmax_loss(embeddings: Tensor, labels: Tensor, class_weights: Tensor,
                            temperature: float = 0.05) -> Tensor:
    """Cross-entropy of the logits cos(z_i, w_c) / τ, mean over the batch.

    Args:
        embeddings (Tensor): N x D (normalised here).
        labels (Tensor): N class indices in [0, C).
        class_weights (Tensor): C x D class proxies (normalised here).
        temperature (float): τ.

    Returns:
        Tensor: scalar.
    """
    logits = F.normalize(embeddings, dim=1) @ F.normalize(class_weights, dim=1).T
    return F.cross_entropy(logits / temperature, labels)


@MODELS.register_module()
class NormalizedSoftmaxLoss(ClassWeightLoss):
    """Normalized softmax loss (Zhai & Wu, "Classification is a Strong Baseline
    for Deep Metric Learning", BMVC 2019 / arXiv 2018); IRT Table 4 "NSoftmax".

    One proxy per training class (the parameter ``class_weights``, C x D):
    L = −(1/B) Σ_i log( exp(cos(z_i, w_{y_i}) / τ) / Σ_c exp(cos(z_i, w_c) / τ) ).

    Shapes: ``embeddings`` B x D, ``labels`` B in [0, num_classes) -> scalar.

    Args:
        num_classes, embed_dim, partial_fc: C, D and the sharding, see
            :class:`.class_weights.ClassWeightLoss`.
        temperature (float): τ. Defaults to 0.05 (Zhai & Wu).
    """

    def __init__(self, num_classes: int, embed_dim: int, temperature: float = 0.05,
                 partial_fc: Optional[dict] = None) -> None:
        super().__init__(num_classes, embed_dim, partial_fc)
        self.temperature = check_number(temperature, 'NormalizedSoftmaxLoss: temperature',
                                        strict=True)

    @property
    def logit_scale(self) -> float:
        return 1.0 / self.temperature

    def target_logit(self, cos: Tensor) -> Tensor:
        return cos  # no margin: every logit is cos / τ

    def extra_repr(self) -> str:
        return f'{self.class_weights_repr()}, temperature={self.temperature}'
