"""SuperGlobal's test-time pooling (Shao et al., "Global Features are All You Need for Image
Retrieval and Reranking", ICCV 2023, Sec. 3; defaults of the official repository's
``modules/coarse_retrieval``): attachable to a trained CNN retriever without training.

``neck=[dict(type='Relup'), dict(type='Rgem'), dict(type='Gemp')]`` pools a map as the paper's
global descriptor; :class:`Sgem` combines the descriptors of several test scales.
docs/methods/reranking.md gives the equations.
"""
from typing import Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

from irtbox.registry import MODELS
from .poolers import gem, last_grid

__all__ = ['Gemp', 'Rgem', 'Sgem', 'Relup']


@MODELS.register_module()
class Relup(nn.Module):
    """ReLU-up: max(x, α) (paper Eq. 4, α = 0.014), raising the small activations a ReLU zeroes.

    The official model applies it in place of the ReLUs of the 256-channel blocks; as a neck it
    acts on the last map: B x C x h x w (a ViT's patch grid) -> B x C x h x w.
    """

    def __init__(self, alpha: float = 0.014):
        super().__init__()
        self.alpha = alpha

    def forward(self, inputs) -> torch.Tensor:
        return last_grid(inputs).clamp(min=self.alpha)


@MODELS.register_module()
class Rgem(nn.Module):
    """Regional-GeM: x' = ½ x + ½ (mean over each s x s window of x^p_r)^(1/p_r) (paper Eq. 2;
    p_r = 2.5, s = 5, stride 1, reflection padding so x' keeps x's size).

    B x C x h x w (a ViT's patch grid, clamped at 0 as GeM clamps) -> B x C x h x w.
    """

    def __init__(self, p: float = 2.5, size: int = 5):
        super().__init__()
        self.p, self.size = float(p), int(size)

    def forward(self, inputs) -> torch.Tensor:
        x = last_grid(inputs).clamp(min=0)
        pad = (self.size - 1) // 2
        padded = F.pad(x, (pad, pad, pad, pad), mode='reflect')
        regional = F.avg_pool2d(padded.pow(self.p), self.size, stride=1).pow(1 / self.p)
        return 0.5 * regional + 0.5 * x


@MODELS.register_module()
class Gemp(nn.Module):
    """GeM+: GeM with the fixed exponent p = 4.6 found best in the paper (Sec. 3.1) and a clamp
    at 1e-8; B x C x h x w (a ViT's patch grid) -> B x C. ``gem_power`` lets the retriever's
    multi-scale combination use the same p."""

    def __init__(self, p: float = 4.6, eps: float = 1e-8):
        super().__init__()
        self.register_buffer('p', torch.tensor([float(p)]))
        self.eps = eps

    @property
    def gem_power(self) -> torch.Tensor:
        return self.p

    def forward(self, inputs) -> torch.Tensor:
        return gem(last_grid(inputs), self.p, self.eps)


@MODELS.register_module()
class Sgem(nn.Module):
    """Scale-GeM over the descriptors of S test scales (paper Eq. 3): with ``infinity`` (the
    official default) the element-wise max of the L2-normalised descriptors; else
    (mean_s (x_s - γ)^p_s)^(1/p_s) + γ, γ the image's smallest entry (p_s = 10).

    A sequence of S tensors B x D (or an S x B x D tensor) -> B x D.
    """

    def __init__(self, p: float = 10.0, infinity: bool = True):
        super().__init__()
        self.p, self.infinity = float(p), infinity

    def forward(self, descriptors: Union[torch.Tensor, Sequence[torch.Tensor]]) -> torch.Tensor:
        x = torch.stack(list(descriptors)) if not torch.is_tensor(descriptors) else descriptors
        if self.infinity:
            return F.normalize(x, dim=-1).amax(dim=0)
        # γ is each image's own smallest entry (the official code embeds one image at a time).
        low = x.amin(dim=(0, -1), keepdim=True)
        return ((x - low).pow(self.p).mean(dim=0, keepdim=True).pow(1 / self.p) + low)[0]
