"""irtbox's ArcFace and normalised softmax in the form of PyTorch Metric Learning 2.9.

:class:`~irtbox.models.losses.PMLLoss` builds these for ``name='ArcFaceLoss'`` and
``'NormalizedSoftmaxLoss'``, so that each formula has one implementation
(:func:`.arcface.arcface_loss`, :func:`.normalized_softmax.normalized_softmax_loss`). PML's
interface is kept:

- the constructor arguments and defaults (ArcFace: ``margin`` in *degrees*,
  28.6, stored in radians as PML does; ``scale`` 64; normalised softmax:
  ``temperature`` 0.05);
- the parameter ``W`` (D x C, hence the state-dict key ``pml_loss.W``),
  drawn from N(0, 1) as PML's default ``weight_init_func``
  (``torch.nn.init.normal_``), so a seeded run starts from the same weights;
- the mean over the batch (PML's default ``MeanReducer`` on per-sample losses).

PML's further options (reducers, distances, regularisers, miner weights) are not offered;
the benchmark uses none. Value and gradients equal PML's (tests/test_models/test_losses).

The one numerical difference: PML takes ``acos`` of the target cosine clamped
to [-1, 1], whose gradient is infinite at ±1; :func:`.arcface.arcface_target_logit`
clamps to [-1 + 1e-7, 1 - 1e-7] and stays finite there.
"""
import math

import torch
from torch import Tensor, nn

from .arcface import arcface_loss
from .normalized_softmax import normalized_softmax_loss

__all__ = ['PMLArcFaceLoss', 'PMLNormalizedSoftmaxLoss']


class _PMLClassWeights(nn.Module):
    """Holds PML's class-weight matrix ``W`` (D x C, N(0, 1) entries)."""

    def __init__(self, num_classes: int, embedding_size: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.embedding_size = embedding_size
        self.W = nn.Parameter(nn.init.normal_(torch.empty(embedding_size, num_classes)))

    def class_weights(self, dtype: torch.dtype) -> Tensor:
        """C x D view of ``W`` in ``dtype`` (PML casts W to the embeddings' dtype)."""
        return self.W.to(dtype).T


class PMLArcFaceLoss(_PMLClassWeights):
    """ArcFace (Deng et al., CVPR 2019, Eq. 3) with PML's arguments and weights.

    Shapes: ``embeddings`` B x D, ``labels`` B in [0, num_classes) -> scalar.

    Args:
        num_classes (int): C.
        embedding_size (int): D.
        margin (float): m in degrees (PML's unit). Defaults to 28.6.
        scale (float): s. Defaults to 64.
    """

    def __init__(self, num_classes: int, embedding_size: int, margin: float = 28.6,
                 scale: float = 64) -> None:
        super().__init__(num_classes, embedding_size)
        self.margin = math.radians(margin)
        self.scale = scale

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return arcface_loss(embeddings, labels, self.class_weights(embeddings.dtype),
                            self.margin, self.scale)

    def extra_repr(self) -> str:
        return f'margin={math.degrees(self.margin)} (degrees), scale={self.scale}'


class PMLNormalizedSoftmaxLoss(_PMLClassWeights):
    """Normalized softmax (Zhai & Wu, BMVC 2019) with PML's arguments and weights:
    cross-entropy of cos(z_i, w_c) / τ.

    Shapes: ``embeddings`` B x D, ``labels`` B in [0, num_classes) -> scalar.

    Args:
        num_classes (int): C.
        embedding_size (int): D.
        temperature (float): τ. Defaults to 0.05.
    """

    def __init__(self, num_classes: int, embedding_size: int, temperature: float = 0.05) -> None:
        super().__init__(num_classes, embedding_size)
        self.temperature = temperature

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return normalized_softmax_loss(embeddings, labels,
                                       self.class_weights(embeddings.dtype), self.temperature)

    def extra_repr(self) -> str:
        return f'temperature={self.temperature}'
