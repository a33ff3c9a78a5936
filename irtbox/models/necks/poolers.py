"""Global poolers: one descriptor per image from a backbone's last returned layer.

Each takes the backbone output (a tuple with one entry per layer) and pools the last entry. A ViT
entry is a :class:`~irtbox.structures.ViTFeatures` (prefix B x P x D, grid B x D x h x w); a CNN
entry is a map B x C x h x w. Token poolers need a ViT; map poolers accept both (for a ViT they pool
the patch grid, prefix tokens excluded, as in IRT Table 9).
"""
import torch
import torch.nn as nn

from irtbox.registry import MODELS
from irtbox.structures import ViTFeatures
from irtbox.utils.errors import ArgumentError

GLOBAL_TOKENS = ('cls', 'dist', 'patch')

__all__ = ['GLOBAL_TOKENS', 'last_layer', 'last_grid', 'last_vit_features', 'global_token', 'gem',
           'ClsTokenPool',
           'DistTokenPool', 'AvgPool', 'MaxPool', 'GeMPool']


def last_layer(inputs):
    """The last layer of the backbone output (or ``inputs`` itself when it is one layer)."""
    if torch.is_tensor(inputs) or isinstance(inputs, ViTFeatures):
        return inputs
    return inputs[-1]


def last_grid(inputs) -> torch.Tensor:
    """The B x C x h x w map of the last layer (patch grid for a ViT)."""
    entry = last_layer(inputs)
    if isinstance(entry, ViTFeatures):
        entry = entry.grid
    if entry.dim() != 4:
        raise ValueError(f'expected a B x C x h x w feature map, got shape {tuple(entry.shape)}')
    return entry


def last_vit_features(inputs, name: str) -> ViTFeatures:
    """The last layer's :class:`ViTFeatures`; errors for CNN features."""
    entry = last_layer(inputs)
    if not isinstance(entry, ViTFeatures):
        raise ValueError(f'{name} needs a vision transformer backbone (prefix tokens); the '
                         'backbone returned a feature map. Use a map pooler (AvgPool, GeMPool, ...).')
    return entry


def global_token(features: ViTFeatures, token: str = 'cls') -> torch.Tensor:
    """One layer's global vector, B x D: the CLS token (prefix index 0), the distillation
    token (index 1, DeiT-distilled / PiT) or the mean of the patch tokens (DToP Table A5's
    three feature types)."""
    if token == 'cls':
        return features.prefix[:, 0]
    if token == 'dist':
        if features.prefix.shape[1] < 2:
            raise ArgumentError("token='dist' needs a model with a distillation token (e.g. "
                                'deit_small_distilled_patch16_224); this one has '
                                f'{features.prefix.shape[1]} prefix token(s).', 'token')
        return features.prefix[:, 1]
    if token == 'patch':
        return features.grid.mean(dim=(-2, -1))
    raise ArgumentError(f'token={token!r}; expected one of {GLOBAL_TOKENS}.', 'token')


def gem(x: torch.Tensor, p: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Generalised mean over the spatial dims: (mean x^p)^(1/p), x clamped at ``eps``.

    Radenović et al., TPAMI 2018, Eq. 3. B x C x h x w -> B x C.
    """
    return x.clamp(min=eps).pow(p).mean(dim=(-2, -1)).pow(1.0 / p)


@MODELS.register_module()
class ClsTokenPool(nn.Module):
    """The CLS token of the last layer, IRT's descriptor (El-Nouby et al. 2021, Sec. 3).

    Backbone output (last entry a ViTFeatures, prefix B x P x D) -> B x D.
    """

    def forward(self, inputs) -> torch.Tensor:
        return global_token(last_vit_features(inputs, 'ClsTokenPool'), 'cls')


@MODELS.register_module()
class DistTokenPool(nn.Module):
    """The distillation token of a DeiT† (``*_distilled_*``) model (Touvron et al. 2021,
    Sec. 5; IRT's DeiT-S† rows).

    Backbone output (last entry a ViTFeatures, prefix B x P x D with P >= 2) -> B x D.
    """

    def forward(self, inputs) -> torch.Tensor:
        return global_token(last_vit_features(inputs, 'DistTokenPool'), 'dist')


@MODELS.register_module()
class AvgPool(nn.Module):
    """Average of the patch tokens / map positions (SPoC-style global average, IRT Table 9).

    Last layer's map (a ViT's patch grid) B x C x h x w -> B x C.
    """

    def forward(self, inputs) -> torch.Tensor:
        return last_grid(inputs).mean(dim=(-2, -1))


@MODELS.register_module()
class MaxPool(nn.Module):
    """Maximum over the patch tokens / map positions (MAC; Tolias et al., ICLR 2016, Eq. 1).

    Last layer's map (a ViT's patch grid) B x C x h x w -> B x C.
    """

    def forward(self, inputs) -> torch.Tensor:
        return last_grid(inputs).amax(dim=(-2, -1))


@MODELS.register_module()
class GeMPool(nn.Module):
    """Generalised-mean pooling with a learnable exponent (Radenović et al. 2018, Eq. 3).

    (mean over h x w of x^p)^(1/p) per channel: last layer's map (a ViT's patch grid)
    B x C x h x w -> B x C. The exponent is exposed as ``gem_power``.

    Inputs are clamped at ``eps`` before the power: GeM is defined for
    non-negative activations (ReLU maps); transformer tokens can be negative,
    so for a ViT this clamp acts like a ReLU, as in IRT's Table 9 GeM row.

    Args:
        p: initial exponent (3 in IRT and cnnimageretrieval).
        eps: clamp floor.
        learnable: whether p is a parameter (trained with the rest).
    """

    def __init__(self, p: float = 3.0, eps: float = 1e-6, learnable: bool = True):
        super().__init__()
        p = torch.tensor([float(p)])
        if learnable:
            self.p = nn.Parameter(p)
        else:
            self.register_buffer('p', p)
        self.eps = eps

    @property
    def gem_power(self) -> torch.Tensor:
        """The exponent p (1-element tensor), e.g. for multi-scale aggregation with the same
        power (``ImageRetriever(multi_scale_power='gem')``)."""
        return self.p

    def forward(self, inputs) -> torch.Tensor:
        return gem(last_grid(inputs), self.p, self.eps)
