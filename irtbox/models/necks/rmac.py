"""R-MAC: regional maximum activations of convolutions (Tolias et al., ICLR 2016)."""
import math
from typing import List, Tuple

import torch
import torch.nn as nn

from irtbox.registry import MODELS
from .poolers import last_grid

__all__ = ['rmac_regions', 'rmac', 'RMACPool']


def rmac_regions(height: int, width: int, levels: int = 3,
                 overlap: float = 0.4) -> List[Tuple[int, int, int]]:
    """Square regions ``(top, left, side)`` of the R-MAC grid on an h x w map.

    At level l = 1..L the side is ⌊2·min(h, w) / (l + 1)⌋ and the regions are spread uniformly,
    their starts at ⌊i·(extent − side) / (n − 1)⌋. Along the short side there are l regions; along
    the long side l + m, where m ∈ 1..6 makes consecutive level-1 regions overlap closest to
    ``overlap`` (the region layout of the cnnimageretrieval R-MAC baseline of IRT Table 7).
    """
    short, long_side = min(height, width), max(height, width)
    extra = 0
    if height != width:
        extra = min(range(1, 7),
                    key=lambda m: abs(1.0 - (long_side - short) / m / short - overlap))
    extra_h, extra_w = (extra, 0) if height > width else (0, extra)
    regions = []
    for level in range(1, levels + 1):
        side = math.floor(2 * short / (level + 1))
        if side == 0:
            continue
        starts_h = _starts(height, side, level + extra_h)
        starts_w = _starts(width, side, level + extra_w)
        regions += [(top, left, side) for top in starts_h for left in starts_w]
    return regions


def _starts(extent: int, side: int, count: int) -> List[int]:
    step = (extent - side) / max(count - 1, 1)
    return [math.floor(i * step) for i in range(count)]


def rmac(x: torch.Tensor, levels: int = 3, eps: float = 1e-6,
         include_global: bool = True) -> torch.Tensor:
    """Sum of the L2-normalised max-pooled regions of ``x`` (B x C x h x w -> B x C)."""
    boxes = rmac_regions(x.shape[-2], x.shape[-1], levels)
    if include_global:
        boxes = [(0, 0, None)] + boxes
    total = 0
    for top, left, side in boxes:
        region = x if side is None else x[..., top:top + side, left:left + side]
        v = region.amax(dim=(-2, -1))
        total = total + v / (v.norm(dim=1, keepdim=True) + eps)
    return total


@MODELS.register_module()
class RMACPool(nn.Module):
    """R-MAC descriptor of the last feature map (Tolias et al. 2016), B x C x h x w -> B x C.

    Regions at ``levels`` scales (see :func:`rmac_regions`) plus, with ``include_global``, the whole
    map (as in the cnnimageretrieval baseline); each region's max-pooled vector is L2-normalised and
    the vectors are summed (the retriever L2-normalises the sum). No regional PCA-whitening.
    """

    def __init__(self, levels: int = 3, eps: float = 1e-6, include_global: bool = True):
        super().__init__()
        self.levels, self.eps, self.include_global = levels, eps, include_global

    def forward(self, inputs) -> torch.Tensor:
        return rmac(last_grid(inputs), self.levels, self.eps, self.include_global)
