"""Normalized softmax (Zhai & Wu 2018): classification with cosine logits."""
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from irtbox.registry import MODELS
from .utils import loss_forward


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
class NormalizedSoftmaxLoss(nn.Module):
    """Normalized softmax loss (Zhai & Wu, "Classification is a Strong Baseline
    for Deep Metric Learning", BMVC 2019 / arXiv 2018); IRT Table 4 "NSoftmax".

    One proxy per training class. Softmax cross-entropy over the cosine
    similarities between the L2-normalised embedding and the L2-normalised
    proxies, divided by the temperature τ. The proxies are the parameter
    ``class_weights`` (C x D), so an optimizer parameter group can give them
    their own learning rate (``paramwise_cfg=dict(custom_keys={'class_weights':
    ...})``); initialised like ``nn.Linear`` weights (uniform ±1/√D).

    Shapes: ``embeddings`` B x D, ``labels`` B in [0, num_classes) -> scalar.

    Args:
        num_classes (int): C, number of training classes.
        embed_dim (int): D.
        temperature (float): τ. Defaults to 0.05 (Zhai & Wu).
    """

    def __init__(self, num_classes: int, embed_dim: int, temperature: float = 0.05) -> None:
        super().__init__()
        for name, value in (('num_classes', num_classes), ('embed_dim', embed_dim)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f'NormalizedSoftmaxLoss: {name} must be an int >= 1, '
                                 f'got {value!r}')
        if not temperature > 0:
            raise ValueError(f'NormalizedSoftmaxLoss: temperature must be > 0, '
                             f'got {temperature!r}')
        self.temperature = float(temperature)
        bound = 1 / math.sqrt(embed_dim)
        self.class_weights = nn.Parameter(
            nn.init.uniform_(torch.empty(num_classes, embed_dim), -bound, bound))

    @loss_forward()
    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        num_classes, embed_dim = self.class_weights.shape
        if embeddings.shape[1] != embed_dim:
            raise ValueError(f'NormalizedSoftmaxLoss: embed_dim={embed_dim} but the '
                             f'embeddings have dimension {embeddings.shape[1]}')
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= num_classes:
            raise ValueError(f'NormalizedSoftmaxLoss: labels must lie in [0, {num_classes}) '
                             f'(num_classes={num_classes}), got labels in [{low}, {high}]; '
                             'the training labels must be contiguous class indices')
        return normalized_softmax_loss(embeddings, labels, self.class_weights,
                                       self.temperature)

    def extra_repr(self) -> str:
        num_classes, embed_dim = self.class_weights.shape
        return (f'num_classes={num_classes}, embed_dim={embed_dim}, '
                f'temperature={self.temperature}')
