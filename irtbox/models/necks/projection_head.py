"""A learned linear layer after the pooled descriptor, to change its dimension."""
from typing import Optional

import torch
import torch.nn as nn

from irtbox.registry import MODELS
from irtbox.utils.checks import check_positive_int

__all__ = ['LinearProjection']


@MODELS.register_module()
class LinearProjection(nn.Module):
    """``y = W x + b``: maps B x ``in_dim`` descriptors to B x ``out_dim``.

    The output-dimension factor of the training-recipe benchmark (Berton, Musgrave & Masone,
    Fig. 7): a linear layer after the CLS token, trained with the network (unlike
    :class:`PCAReduction`). ``out_dim=None`` is the identity (the benchmark's baseline), so
    that the factor is one config key, ``model.neck.1.out_dim=d``.

    Args:
        in_dim (int): Dimension of the input descriptor (768 for ViT-B CLS).
        out_dim (int | None): Dimension of the output descriptor; None for the identity.
        bias (bool): Learn an additive bias. Defaults to True.
    """

    def __init__(self, in_dim: int, out_dim: Optional[int], bias: bool = True):
        super().__init__()
        self.in_dim = check_positive_int(in_dim, 'LinearProjection: in_dim')
        self.out_dim = check_positive_int(out_dim, 'LinearProjection: out_dim', allow_none=True)
        self.fc = None if self.out_dim is None else nn.Linear(self.in_dim, self.out_dim, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f'LinearProjection: expected B x {self.in_dim} descriptors, '
                             f'got shape {tuple(x.shape)}')
        return x if self.fc is None else self.fc(x)
