"""DToP's enhanced locality module (ELM): IRB + ASPP + WaveBlock on a token map.

Song et al., "Boosting vision transformers for image retrieval", WACV 2023: U = ELM(Y) (Eq. 11,
Table A10). The paper names the three parts; their sizes are reconstructed: a reduced channel
space C (64) keeps the DToP neck at the paper's ~0.3M parameters (``configs/dtop/README.md``).
"""
from typing import Sequence

import torch
import torch.nn as nn

from irtbox.registry import MODELS

__all__ = ['conv_bn_act', 'InvertedResidual', 'ASPP', 'WaveBlock', 'EnhancedLocalityModule']


def conv_bn_act(in_channels: int, out_channels: int, kernel_size: int = 1, dilation: int = 1,
                groups: int = 1, act: bool = True) -> nn.Sequential:
    """Conv (same padding, no bias) + BatchNorm (+ ReLU6)."""
    layers = [nn.Conv2d(in_channels, out_channels, kernel_size,
                        padding=dilation * (kernel_size // 2), dilation=dilation,
                        groups=groups, bias=False),
              nn.BatchNorm2d(out_channels)]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


@MODELS.register_module()
class InvertedResidual(nn.Module):
    """MobileNetV2 inverted residual block, stride 1 (Sandler et al., CVPR 2018, Table 1).

    x + [1x1 C -> tC, BN, ReLU6; depthwise 3x3, BN, ReLU6; 1x1 tC -> C, BN (linear
    bottleneck)](x). B x C x h x w -> B x C x h x w.

    Args:
        channels: C.
        expand_ratio: t (6 in MobileNetV2).
    """

    def __init__(self, channels: int, expand_ratio: int = 6):
        super().__init__()
        hidden = channels * expand_ratio
        self.block = nn.Sequential(
            conv_bn_act(channels, hidden, 1),
            conv_bn_act(hidden, hidden, 3, groups=hidden),
            conv_bn_act(hidden, channels, 1, act=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


@MODELS.register_module()
class ASPP(nn.Module):
    """Atrous spatial pyramid pooling (DeepLab v3, Chen et al. 2017, Sec. 3.3).

    Parallel branches on B x C x h x w: a 1x1 conv, one 3x3 conv per atrous
    rate, and image pooling (global average -> 1x1 conv -> broadcast back to
    h x w); concatenated ((2 + len(rates)) C channels) and projected by a 1x1
    conv to C. Conv branches are conv + BN + ReLU6. -> B x C x h x w.

    The image-pooling branch has a bias and no BatchNorm (BN over B x C x 1 x 1 fails for a
    batch of one); DeepLab's dropout is left out (DToP does not mention it).

    Args:
        channels: C.
        rates: dilation rates of the 3x3 branches. Small rates suit the ~24-token
            grids of DToP; DeepLab's (6, 12, 18) sample mostly padding there.
    """

    def __init__(self, channels: int, rates: Sequence[int] = (1, 2, 3)):
        super().__init__()
        self.branches = nn.ModuleList(
            [conv_bn_act(channels, channels, 1)] +
            [conv_bn_act(channels, channels, 3, dilation=r) for r in rates])
        self.image_pool = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, channels, 1), nn.ReLU6(inplace=True))
        self.project = conv_bn_act(channels * (len(rates) + 2), channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = [branch(x) for branch in self.branches]
        outs.append(self.image_pool(x).expand_as(outs[0]))
        return self.project(torch.cat(outs, dim=1))


@MODELS.register_module()
class WaveBlock(nn.Module):
    """WaveBlock feature augmentation (Wang et al., "Attentive WaveBlock", 2021), training only.

    In training, one random horizontal band of ``round(ratio * h)`` rows (at
    least one) keeps its values and every other row is multiplied by ``factor``;
    the band is drawn once per forward and shared by the batch, as in the
    original. In eval mode it is the identity. B x C x h x w -> B x C x h x w.

    Args:
        ratio: band height as a fraction of h (0.3).
        factor: multiplier outside the band (1.5).
    """

    def __init__(self, ratio: float = 0.3, factor: float = 1.5):
        super().__init__()
        if not 0 < ratio <= 1:
            raise ValueError(f'WaveBlock: ratio={ratio}; expected 0 < ratio <= 1.')
        self.ratio = ratio
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        h = x.shape[-2]
        band = min(h, max(1, round(self.ratio * h)))
        start = int(torch.randint(0, h - band + 1, ()))
        mask = x.new_full((h, 1), self.factor)
        mask[start:start + band] = 1.0
        return x * mask

    def extra_repr(self) -> str:
        return f'ratio={self.ratio}, factor={self.factor}'


@MODELS.register_module()
class EnhancedLocalityModule(nn.Module):
    """DToP's ELM (Eq. 11; Table A10): U = ELM(Y) on the patch-token map Y.

    1x1 conv D -> C (bias, linear) -> InvertedResidual(C) -> ASPP(C) -> 1x1 conv
    C -> D (bias, linear, so U lives in Y's signed token space, as the fusions
    with Y need) -> WaveBlock (training only). B x D x h x w -> B x D x h x w.
    The channel reduction and sizes are reconstructed (see the module docstring).

    Args:
        in_channels: D (768 for ViT-B).
        channels: C, the reduced width (64).
        expand_ratio: IRB expansion (6).
        aspp_rates: ASPP atrous rates ((1, 2, 3)).
        irb, aspp, waveblock: switch each component (Table A10); a switched-off
            component is the identity.
        wave_ratio, wave_factor: WaveBlock band height ratio (0.3) and factor (1.5).
    """

    def __init__(self,
                 in_channels: int,
                 channels: int = 64,
                 expand_ratio: int = 6,
                 aspp_rates: Sequence[int] = (1, 2, 3),
                 irb: bool = True,
                 aspp: bool = True,
                 waveblock: bool = True,
                 wave_ratio: float = 0.3,
                 wave_factor: float = 1.5):
        super().__init__()
        self.reduce = nn.Conv2d(in_channels, channels, 1)
        self.irb = InvertedResidual(channels, expand_ratio) if irb else nn.Identity()
        self.aspp = ASPP(channels, aspp_rates) if aspp else nn.Identity()
        self.expand = nn.Conv2d(channels, in_channels, 1)
        self.waveblock = WaveBlock(wave_ratio, wave_factor) if waveblock else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.waveblock(self.expand(self.aspp(self.irb(self.reduce(x)))))
