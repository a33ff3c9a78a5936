"""L2 normalisation as a neck (for use inside a neck sequence)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from irtbox.registry import MODELS

__all__ = ['L2Norm']


@MODELS.register_module()
class L2Norm(nn.Module):
    """Projects B x D descriptors onto the unit sphere: x / max(‖x‖₂, eps)."""

    def __init__(self, eps: float = 1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1, eps=self.eps)
