"""Fusions of two features of the same shape (DToP, Song et al. WACV 2023, supp. Eqs. A13-A21).

The pure functions work along any channel ``dim``: ``dim=1`` fuses two maps
B x D x h x w token by token (Eq. A13, the input Y and the output U of the
enhanced locality module); ``dim=-1`` fuses two vectors B x D (the pooled local
vector with the global one, DToP's output, reconstructed after DOLG).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from irtbox.registry import MODELS

__all__ = ['FUSION_MODES', 'project_onto', 'orthogonal_fusion', 'fast_normalized_fusion',
           'FeatureFusion']

FUSION_MODES = ('y', 'u', 'sum', 'hadamard', 'concat', 'fast_normalized', 'orthogonal')


def project_onto(y: torch.Tensor, u: torch.Tensor, dim: int = 1, eps: float = 1e-6) -> torch.Tensor:
    """proj_u(y) = (<y, u> / (<u, u> + eps)) u along ``dim`` (Eq. A21).

    ``eps`` keeps a zero ``u`` (e.g. a ReLU-dead token) from dividing by zero;
    its projection is then zero.
    """
    return (y * u).sum(dim, keepdim=True) / ((u * u).sum(dim, keepdim=True) + eps) * u


def orthogonal_fusion(y: torch.Tensor, u: torch.Tensor, dim: int = 1,
                      eps: float = 1e-6) -> torch.Tensor:
    """[y - proj_u(y); u] along ``dim`` (Eq. A20; Gram-Schmidt on each pair). Doubles ``dim``."""
    return torch.cat([y - project_onto(y, u, dim, eps), u], dim=dim)


def fast_normalized_fusion(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor,
                           eps: float = 1e-4) -> torch.Tensor:
    """(w1 y + w2 u) / (w1 + w2 + eps) with w = relu(v) (Eq. A19; BiFPN, Tan et al. 2020)."""
    w = F.relu(v)
    return (w[0] * y + w[1] * u) / (w[0] + w[1] + eps)


@MODELS.register_module()
class FeatureFusion(nn.Module):
    """h(Y, U): fuses two same-shape features along the channel dim (DToP Eq. A13, Table A13).

    Modes (Eqs. A14-A20): ``'y'`` -> Y; ``'u'`` -> U; ``'sum'`` -> Y + U;
    ``'hadamard'`` -> Y ⊙ U; ``'concat'`` -> [Y; U]; ``'fast_normalized'`` ->
    (w1 Y + w2 U) / (w1 + w2 + eps), w = relu of two learned scalars (initialised
    at 1 as in BiFPN); ``'orthogonal'`` -> per token [y_i - proj_{u_i}(y_i); u_i].

    Shapes: Y and U are B x D x ... (channels at ``dim``); the output has D
    channels, or 2D for ``'concat'`` and ``'orthogonal'`` (see ``out_channels``).

    Args:
        mode: one of ``FUSION_MODES``.
        dim: the channel dimension (1 for maps, -1 for vectors).
        eps: the denominator guard of ``'orthogonal'`` (1e-6) and
            ``'fast_normalized'`` (1e-4, BiFPN's value) when not given.
    """

    def __init__(self, mode: str = 'orthogonal', dim: int = 1, eps: float = None):
        super().__init__()
        if mode not in FUSION_MODES:
            raise ValueError(f'FeatureFusion: mode={mode!r}; expected one of {FUSION_MODES}.')
        self.mode = mode
        self.dim = dim
        self.eps = eps if eps is not None else (1e-4 if mode == 'fast_normalized' else 1e-6)
        if mode == 'fast_normalized':
            self.v = nn.Parameter(torch.ones(2))

    def out_channels(self, channels: int) -> int:
        """Channel count of the output for inputs with ``channels`` channels."""
        return 2 * channels if self.mode in ('concat', 'orthogonal') else channels

    def forward(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        if self.mode == 'y':
            return y
        if y.shape != u.shape:
            raise ValueError(f'FeatureFusion: Y and U must have the same shape, '
                             f'got {tuple(y.shape)} and {tuple(u.shape)}.')
        if self.mode == 'u':
            return u
        if self.mode == 'sum':
            return y + u
        if self.mode == 'hadamard':
            return y * u
        if self.mode == 'concat':
            return torch.cat([y, u], dim=self.dim)
        if self.mode == 'fast_normalized':
            return fast_normalized_fusion(y, u, self.v, self.eps)
        return orthogonal_fusion(y, u, self.dim, self.eps)

    def extra_repr(self) -> str:
        return f'mode={self.mode!r}, dim={self.dim}, eps={self.eps}'
