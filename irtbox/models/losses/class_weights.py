"""Base of the classification losses that hold one weight vector (proxy) per class."""
import math

import torch
from torch import Tensor, nn

from irtbox.utils.checks import check_positive_int

__all__ = ['ClassWeightLoss']


class ClassWeightLoss(nn.Module):
    """Owns ``class_weights`` (C x D, an ``nn.Parameter`` so that an optimiser
    parameter group can target it, e.g. ``paramwise_cfg.custom_keys``), drawn
    uniformly in ±1/√D, and checks embeddings and labels against it."""

    def __init__(self, num_classes: int, embed_dim: int) -> None:
        super().__init__()
        try:
            num_classes = check_positive_int(num_classes, 'num_classes')
            embed_dim = check_positive_int(embed_dim, 'embed_dim')
        except ValueError as err:
            raise ValueError(f'{type(self).__name__}: {err}') from err
        bound = 1 / math.sqrt(embed_dim)
        self.class_weights = nn.Parameter(
            nn.init.uniform_(torch.empty(num_classes, embed_dim), -bound, bound))

    def check_inputs(self, embeddings: Tensor, labels: Tensor) -> None:
        name = type(self).__name__
        num_classes, embed_dim = self.class_weights.shape
        if embeddings.shape[1] != embed_dim:
            raise ValueError(f'{name}: embed_dim={embed_dim} but the embeddings have '
                             f'dimension {embeddings.shape[1]}')
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= num_classes:
            raise ValueError(f'{name}: labels must lie in [0, {num_classes}) '
                             f'(num_classes={num_classes}), got labels in [{low}, {high}]; '
                             'the training labels must be contiguous class indices')
