"""DToP neck: multi-layer global + local token pooling (Song et al., WACV 2023).

"Boosting vision transformers for image retrieval" (DToP). Only the supplementary is available
and no code was released, so the wiring below is a reconstruction (``configs/dtop/README.md``,
"Reconstructed choices"); every reconstructed choice is a keyword option. Defaults, at D = 768
and k = 6 layers, on a B x 768 x h x w patch grid per layer:

    u = mean_l CLS_l                                 B x D        (Eqs. 5, 7)
    Y = mean_l grid_l                                B x D x h x w (Eqs. 6, 8)
    U = ELM(Y)                                       B x D x h x w (Eq. 11)
    Y' = per token [y_i - proj_{u_i}(y_i); u_i]      B x 2D x h x w (Eq. 9 = A13, A20)
    [a; b] = GeM(Y'),  y = a + b                     B x D         (Eq. 10)
    z = [y - proj_u(y); u]                           B x 2D = 1536 (Eq. 12)

about 0.29M parameters (the paper's 0.3M). The retriever L2-normalises z.
"""
from typing import Optional

import torch
import torch.nn as nn

from irtbox.registry import MODELS
from irtbox.structures import ViTFeatures
from irtbox.utils.checks import check_positive_int
from .fusions import orthogonal_fusion
from .poolers import GLOBAL_TOKENS, AvgPool, GeMPool, global_token

__all__ = ['AGGREGATIONS', 'DEFAULT_ELM', 'DEFAULT_FUSION', 'aggregate_layers', 'LayerAggregation',
           'DToPNeck']

AGGREGATIONS = ('mean', 'sum', 'softmax')
DEFAULT_ELM = dict(type='EnhancedLocalityModule')
DEFAULT_FUSION = dict(type='FeatureFusion', mode='orthogonal')
_DEFAULTS = dict(elm=DEFAULT_ELM, fusion=DEFAULT_FUSION)


def aggregate_layers(x: torch.Tensor, mode: str = 'mean',
                     logits: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Combines k layers stacked on dim 0: k x B x ... -> B x ... (DToP Eqs. 5-8, reconstructed).

    ``'mean'`` and ``'sum'`` are parameter-free; ``'softmax'`` weights layer l by
    softmax(logits)_l (``logits``: k values).
    """
    if mode == 'mean':
        return x.mean(0)
    if mode == 'sum':
        return x.sum(0)
    if mode == 'softmax':
        weights = logits.softmax(0).view(-1, *([1] * (x.dim() - 1)))
        return (weights * x).sum(0)
    raise ValueError(f'aggregate_layers: mode={mode!r}; expected one of {AGGREGATIONS}.')


@MODELS.register_module()
class LayerAggregation(nn.Module):
    """Aggregation of k layers' features: k x B x ... -> B x ... (DToP Eqs. 5-8, reconstructed).

    Args:
        mode: ``'mean'`` (default), ``'sum'`` or ``'softmax'`` (k learned logits,
            initialised at 0, i.e. the mean).
        num_layers: k; required for ``'softmax'``.
    """

    def __init__(self, mode: str = 'mean', num_layers: Optional[int] = None):
        super().__init__()
        if mode not in AGGREGATIONS:
            raise ValueError(f'LayerAggregation: mode={mode!r}; expected one of {AGGREGATIONS}.')
        self.mode = mode
        if mode == 'softmax':
            if num_layers is None:
                raise ValueError("LayerAggregation: mode='softmax' learns one weight per layer; "
                                 'give num_layers (the number of backbone out_indices).')
            num_layers = check_positive_int(num_layers, 'LayerAggregation: num_layers')
            self.logits = nn.Parameter(torch.zeros(num_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == 'softmax' and x.shape[0] != self.logits.numel():
            raise ValueError(f'LayerAggregation: built for num_layers={self.logits.numel()} '
                             f'but got {x.shape[0]} layers.')
        return aggregate_layers(x, self.mode, getattr(self, 'logits', None))

    def extra_repr(self) -> str:
        return f'mode={self.mode!r}'


@MODELS.register_module()
class DToPNeck(nn.Module):
    """DToP's neck: k layers of ViTFeatures -> one global descriptor B x N.

    Input: one :class:`~irtbox.structures.ViTFeatures` (prefix B x P x D, grid B x D x h x w)
    per layer, any k >= 1 and grid size. Output: B x N, not normalised.

    Pipeline (the module docstring): order ``'R2'`` aggregates the layers first (u, Y), then
    ELM -> fusion h(Y, U) -> pooling -> fold to D (``local_fold``: ``'sum'`` a + b or ``'linear'``,
    a learned 2D -> D layer) -> global-local fusion with u (2D); order ``'R1'`` runs the same per
    layer and aggregates the k outputs. A final linear layer maps to ``out_dim`` when asked.

    Args:
        in_channels: D, the token width (768 for ViT-B and R50+ViT-B).
        aggregation: layer aggregation, ``'mean'``, ``'sum'`` or ``'softmax'``.
        num_layers: k; required for ``'softmax'``, else only checked when given.
        order: ``'R2'`` or ``'R1'`` (see above).
        global_token: ``'cls'``, ``'dist'`` or ``'patch'`` (mean of patch tokens).
        branches: ``'both'``; ``'global'`` (u only) or ``'local'`` (y only), the
            single-branch setting of Table A5.
        elm: config of U = ELM(Y) (Eq. 11; ``in_channels`` filled in), default
            ``dict(type='EnhancedLocalityModule')``; ``None`` for ``fusion`` mode ``'y'``.
        fusion: config of h(Y, U) (Eq. A13; ``dim=1`` filled in; must have
            ``out_channels(D)``), default ``dict(type='FeatureFusion', mode='orthogonal')``.
        pool: ``'gem'`` or ``'avg'``.
        gem_p, gem_learnable: GeM exponent and whether it is learned.
        local_fold: ``'sum'`` or ``'linear'`` (see above).
        global_fusion: ``'orthogonal'`` z = [y - proj_u(y); u] (DOLG-style) or
            ``'concat'`` z = [y; u].
        out_dim: N; ``None`` keeps the natural width (2D for ``'both'``, D otherwise).
        project: force (True) or forbid (False) the output linear layer; ``None``: only when
            ``out_dim`` differs from the natural width (Table A5's FC to N = D needs True).
        eps: denominator guard of the global-local orthogonal fusion (Eq. 12); the local
            fusion takes its own (``fusion.eps``).
    """

    def __init__(self,
                 in_channels: int = 768,
                 aggregation: str = 'mean',
                 num_layers: Optional[int] = None,
                 order: str = 'R2',
                 global_token: str = 'cls',
                 branches: str = 'both',
                 elm: Optional[dict] = DEFAULT_ELM,
                 fusion: dict = DEFAULT_FUSION,
                 pool: str = 'gem',
                 gem_p: float = 3.0,
                 gem_learnable: bool = True,
                 local_fold: str = 'sum',
                 global_fusion: str = 'orthogonal',
                 out_dim: Optional[int] = None,
                 project: Optional[bool] = None,
                 eps: float = 1e-6):
        super().__init__()
        for name, value, allowed in (
                ('aggregation', aggregation, AGGREGATIONS), ('order', order, ('R1', 'R2')),
                ('global_token', global_token, GLOBAL_TOKENS),
                ('branches', branches, ('both', 'global', 'local')), ('pool', pool, ('gem', 'avg')),
                ('local_fold', local_fold, ('sum', 'linear')),
                ('global_fusion', global_fusion, ('orthogonal', 'concat'))):
            if value not in allowed:
                raise ValueError(f'DToPNeck: {name}={value!r}; expected one of {allowed}.')
        self.in_channels = in_channels
        self.num_layers = num_layers
        self.order = order
        self.global_token = global_token
        self.branches = branches
        self.eps = eps
        # Only the aggregations in use are built: unused parameters would stall DDP.
        if order == 'R2':
            if branches != 'local':
                self.global_agg = LayerAggregation(aggregation, num_layers)
            if branches != 'global':
                self.local_agg = LayerAggregation(aggregation, num_layers)
        else:
            self.layer_agg = LayerAggregation(aggregation, num_layers)

        if branches != 'global':
            self.fusion = self._built('fusion', fusion, dim=1)
            if not callable(getattr(self.fusion, 'out_channels', None)):
                raise ValueError(f'DToPNeck: fusion {type(self.fusion).__name__} has no '
                                 'out_channels(D); use FeatureFusion or a module with that method.')
            # Mode 'y' ignores U: an ELM there would hold unused parameters (which stall DDP).
            mode = getattr(self.fusion, 'mode', None)
            if mode == 'y' and elm is not None:
                raise ValueError("DToPNeck: fusion mode 'y' ignores the ELM output; set elm=None.")
            if mode != 'y' and elm is None:
                raise ValueError(f'DToPNeck: fusion mode {mode!r} fuses Y with U = ELM(Y); '
                                 "give elm=dict(type='EnhancedLocalityModule', ...).")
            self.elm = None if mode == 'y' else self._built('elm', elm, in_channels=in_channels)
            self.pool = GeMPool(p=gem_p, learnable=gem_learnable) if pool == 'gem' else AvgPool()
            fused = self.fusion.out_channels(in_channels)
            self.fold = nn.Linear(fused, in_channels) if (
                fused != in_channels and local_fold == 'linear') else None
        self.global_fusion = global_fusion

        natural = 2 * in_channels if branches == 'both' else in_channels
        if project is None:
            project = out_dim is not None and out_dim != natural
        if project and out_dim is None:
            raise ValueError('DToPNeck: project=True needs out_dim.')
        if not project and out_dim is not None and out_dim != natural:
            raise ValueError(f'DToPNeck: out_dim={out_dim} differs from the natural width '
                             f'{natural} but project=False.')
        self.proj = nn.Linear(natural, out_dim) if project else None
        self.out_dim = out_dim if project else natural

    @staticmethod
    def _built(name: str, cfg, **defaults) -> nn.Module:
        if not (isinstance(cfg, dict) and 'type' in cfg):
            raise ValueError(f"DToPNeck: {name} must be a config dict with a 'type', e.g. "
                             f'{name}={_DEFAULTS[name]!r}; got {cfg!r}.')
        cfg = dict(cfg)
        for key, value in defaults.items():
            if cfg.setdefault(key, value) != value:
                raise ValueError(f'DToPNeck: {name}.{key}={cfg[key]!r} but the neck needs '
                                 f'{value!r}; leave it out of {name}.')
        try:
            return MODELS.build(cfg)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f'DToPNeck: could not build {name}={cfg!r}: {err}') from err

    @property
    def gem_power(self) -> Optional[torch.Tensor]:
        """The GeM exponent of the local pooling; None without one (``pool='avg'``, or the
        global branch only)."""
        return getattr(getattr(self, 'pool', None), 'gem_power', None)

    def _layers(self, inputs):
        """Checks the backbone tuple; returns u_l (k x B x D; None for the local branch only)
        and Y_l (k x B x D x h x w)."""
        if not isinstance(inputs, (tuple, list)) or isinstance(inputs, ViTFeatures) or not inputs:
            raise ValueError('DToPNeck: expected the backbone tuple of ViTFeatures, one per '
                             f'layer, got {type(inputs).__name__}.')
        if self.num_layers is not None and len(inputs) != self.num_layers:
            raise ValueError(f'DToPNeck: num_layers={self.num_layers} but the backbone returned '
                             f'{len(inputs)} layers; match it to the backbone out_indices.')
        tokens, grids = [], []
        for i, entry in enumerate(inputs):
            if not isinstance(entry, ViTFeatures):
                raise ValueError('DToPNeck needs a vision transformer backbone: each layer a '
                                 f'ViTFeatures (prefix B x P x D, grid B x D x h x w); layer {i} '
                                 f'is a {type(entry).__name__}.')
            grid = entry.grid
            if grid.dim() != 4 or grid.shape[1] != self.in_channels:
                raise ValueError(f'DToPNeck: layer {i} grid has shape {tuple(grid.shape)}; '
                                 f'expected B x {self.in_channels} (in_channels) x h x w.')
            if grids and grid.shape != grids[0].shape:
                raise ValueError(f'DToPNeck: layer {i} grid {tuple(grid.shape)} differs from '
                                 f'layer 0 {tuple(grids[0].shape)}.')
            if self.branches != 'local':
                try:
                    tokens.append(global_token(entry, self.global_token))
                except ValueError as err:
                    raise ValueError(f'DToPNeck (global_token={self.global_token!r}): '
                                     f'{err}') from err
            grids.append(grid)
        return (torch.stack(tokens) if tokens else None), torch.stack(grids)

    def _describe(self, u: Optional[torch.Tensor], y_map: Optional[torch.Tensor]) -> torch.Tensor:
        """Global vector u (B x D) and map Y (B x D x h x w) -> the descriptor before
        projection (B x 2D, or B x D for a single branch)."""
        if self.branches == 'global':
            return u
        fused = self.fusion(y_map, None if self.elm is None else self.elm(y_map))
        y = self.pool(fused)
        if y.shape[1] != self.in_channels:
            y = self.fold(y) if self.fold is not None else \
                y[:, :self.in_channels] + y[:, self.in_channels:]
        if self.branches == 'local':
            return y
        if self.global_fusion == 'concat':
            return torch.cat([y, u], dim=1)
        return orthogonal_fusion(y, u, dim=1, eps=self.eps)

    def forward(self, inputs) -> torch.Tensor:
        us, maps = self._layers(inputs)
        if self.order == 'R2':
            u = None if us is None else self.global_agg(us)
            y_map = None if self.branches == 'global' else self.local_agg(maps)
            z = self._describe(u, y_map)
        else:
            k, b = maps.shape[:2]
            z = self._describe(None if us is None else us.flatten(0, 1), maps.flatten(0, 1))
            z = self.layer_agg(z.view(k, b, -1))
        return z if self.proj is None else self.proj(z)
