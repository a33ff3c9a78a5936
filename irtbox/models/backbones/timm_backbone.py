"""A wrapper that turns any timm model into an irtbox backbone."""
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.logging import print_log
from mmengine.model import BaseModule
from torch.utils.checkpoint import checkpoint as grad_checkpoint

from irtbox.registry import MODELS
from irtbox.structures import ViTFeatures
from irtbox.utils.checkpoint import load_state_dict_file, state_digest, strip_prefixes
from .pretrained import create_timm_model, pretrained_init_cfg

__all__ = ['POS_EMBED_MODES', 'NORM_MODES', 'resize_grid_pos_embed', 'pad_same', 'TimmBackbone']

POS_EMBED_MODES = ('timm', 'dpe-bilinear', 'dpe-bicubic', 'none', 'cpe')
NORM_MODES = ('last', 'all', 'none')


def resize_grid_pos_embed(grid_pos_embed: torch.Tensor, size: Tuple[int, int],
                          mode: str = 'bilinear') -> torch.Tensor:
    """Resize a 1 x D x gh x gw position-embedding grid to 1 x D x h x w.

    Dynamic position embedding (DToP, Song et al. WACV 2023, Table A9): plain
    ``F.interpolate`` with ``align_corners=False`` and no antialiasing (timm's own
    resampling uses bicubic with antialias). At the native size it is the identity.
    """
    if mode not in ('bilinear', 'bicubic'):
        raise ValueError(
            f"resize_grid_pos_embed: mode must be 'bilinear' or 'bicubic', got {mode!r}.")
    return F.interpolate(grid_pos_embed, size=tuple(size), mode=mode, align_corners=False,
                         antialias=False)


def pad_same(x: torch.Tensor, patch_size: Tuple[int, int]) -> torch.Tensor:
    """Zero-pad B x C x H x W to multiples of ``patch_size`` the TF-"same" way (timm's
    ``pad_same`` for a conv with kernel = stride = p): ceil(H / p) outputs, the padding split
    floor-half before, the rest after, so the token grid stays centred on the image."""
    from timm.layers import pad_same as timm_pad_same
    return timm_pad_same(x, tuple(patch_size), tuple(patch_size))


# timm arguments that count something (blocks, heads, channels): a float or 0 is a mistake.
_WHOLE_NUMBER_KWARGS = frozenset({'depth', 'num_heads', 'embed_dim', 'patch_size', 'in_chans'})


@MODELS.register_module()
class TimmBackbone(BaseModule):
    """Any timm model, returning the features of chosen layers.

    Forward contract: images B x 3 x H x W -> a tuple with one entry per layer
    of ``out_indices``, in increasing layer order. Vision transformers (models with prefix tokens
    and blocks, e.g. ``deit_small_patch16_224``) give a :class:`~irtbox.structures.ViTFeatures` per
    layer: ``prefix`` B x P x D (P = 1 for CLS, 2 with a distillation token, more with register
    tokens) and ``grid`` B x D x h x w. Convolutional networks give B x C x h x w maps.

    Position embedding (``pos_embed``; DToP Table A9; docs/methods/dtop.md):
    ``'timm'`` is the model's own forward (any timm model); ``'dpe-bilinear'`` /
    ``'dpe-bicubic'`` resize the grid part of the learned embedding to each input's token grid
    (:func:`resize_grid_pos_embed`; prefix entries unchanged; equal to ``'timm'`` at the native
    grid); ``'none'`` removes the embedding, also from the state dict (an unused parameter stops
    DDP); ``'cpe'`` (CPVT, Chu et al. 2021) adds t <- t + DWConv3x3(t) after the first block,
    zero-initialised so a pretrained backbone starts as ``'none'``. The non-``'timm'`` modes run
    their own token path, for timm's ``VisionTransformer`` family and PiT; inputs not a multiple
    of the patch size are zero-padded TF-"same" (:func:`pad_same`).

    Final norm (``norm``): ``'last'`` on the last block only (its CLS is timm's
    ``forward_features`` one, the IRT descriptor); ``'all'`` on every returned layer (DToP);
    ``'none'``. ``False`` / ``True`` mean ``'last'`` / ``'all'``.

    Pretrained weights (``pretrained``, ``checkpoint`` or an ``init_cfg`` of type
    ``'Pretrained'``, one of the three) are loaded at build and put back after
    ``init_weights()``; the log names them with this module's state-dict sha256.

    Args:
        model_name: any name ``timm.list_models()`` knows.
        pretrained: timm's pretrained weights (rank 0 downloads, other ranks read its cache).
        checkpoint: path or http(s) URL of a state dict (``state_dict``/``model`` wrapper and
            ``module.``/``backbone.`` prefixes allowed), loaded ``weights_only``.
        out_indices: layers to return; negative ones count from the end.
        channels_last: on a GPU, give the model its batches in ``torch.channels_last``
            memory format, which cuDNN's convolutions run faster (and the layers after them
            keep); never on a CPU. None: where the model has convolutions beyond a ViT's one
            patch projection (a CNN, a hybrid's ResNet stem).
        **timm_kwargs: passed to ``timm.create_model`` (``img_size``, ``drop_path_rate``, ...).
    """

    def __init__(self,
                 model_name: str,
                 pretrained: bool = False,
                 checkpoint: Optional[str] = None,
                 out_indices: Union[int, Sequence[int]] = -1,
                 norm: Union[bool, str] = 'last',
                 pos_embed: str = 'timm',
                 channels_last: Optional[bool] = None,
                 init_cfg=None,
                 **timm_kwargs):
        super().__init__(init_cfg=init_cfg)
        import timm
        if model_name not in timm.list_models(pretrained=False) and \
                model_name.split('.')[0] not in timm.list_models(pretrained=False):
            raise ValueError(
                f'TimmBackbone: unknown timm model_name={model_name!r}; see timm.list_models().')
        sources = [name for name, given in (
            ('pretrained=True', pretrained), ('checkpoint=...', checkpoint),
            ("init_cfg=dict(type='Pretrained', ...)", pretrained_init_cfg(init_cfg))) if given]
        if len(sources) > 1:
            raise ValueError(
                f'TimmBackbone: give one source of weights, not {" and ".join(sources)}.')
        if isinstance(norm, bool):
            norm = 'all' if norm else 'last'
        if norm not in NORM_MODES:
            raise ValueError(
                f'TimmBackbone: norm={norm!r}; expected one of {NORM_MODES} or a bool.')
        if pos_embed not in POS_EMBED_MODES:
            raise ValueError(
                f'TimmBackbone: pos_embed={pos_embed!r}; expected one of {POS_EMBED_MODES}.')
        for key in _WHOLE_NUMBER_KWARGS & set(timm_kwargs):
            value = timm_kwargs[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                # timm would fail deep inside ("'float' object is not iterable").
                raise ValueError(f'TimmBackbone({model_name}): {key}={value!r}: expected a '
                                 'whole number of at least 1')
        self.model = create_timm_model(model_name, pretrained, num_classes=0, **timm_kwargs)
        self.weights_source = (f"timm's pretrained weights "
                               f"{self.model.pretrained_cfg.get('hf_hub_id') or model_name}"
                               if pretrained else 'random initialisation')
        self.model_name = model_name
        self.channels_last = channels_last if channels_last is not None else sum(
            isinstance(m, nn.Conv2d) for m in self.model.modules()) > 1
        self.pos_embed_mode = pos_embed
        self.norm = norm
        self.embed_dim = self.model.num_features
        self.cpe = None
        if pos_embed == 'timm':
            self.token_path = None
            self.is_vit = hasattr(self.model, 'num_prefix_tokens') and hasattr(self.model, 'blocks')
            self.num_layers = len(self.model.blocks) if self.is_vit else len(
                self.model.feature_info)
        else:
            self.token_path = self._check_token_path()
            self.is_vit = True
            widths = [blk.norm1.normalized_shape[0] for _, _, blocks in self._block_groups()
                      for blk in blocks]
            self.num_layers = len(widths)
            if pos_embed == 'cpe':
                self.cpe = nn.Conv2d(widths[0], widths[0], 3, padding=1, groups=widths[0])
                nn.init.zeros_(self.cpe.weight)
                nn.init.zeros_(self.cpe.bias)
            if pos_embed in ('none', 'cpe'):
                # The learned embedding is never added: as a parameter it would get no
                # gradient, which DDP refuses at the next iteration.
                self.model.pos_embed = None
        indices = [out_indices] if isinstance(out_indices, int) else list(out_indices)
        self.out_indices = tuple(sorted(self._resolve(i) for i in indices))
        if self.token_path == 'pit' and norm == 'all':
            narrow = [i for i in self.out_indices if widths[i] != self.embed_dim]
            if narrow:
                raise ValueError(
                    f"TimmBackbone: norm='all' with {model_name}: the final norm is "
                    f'{self.embed_dim}-wide but out_indices {narrow} are blocks of width '
                    f'{[widths[i] for i in narrow]}; take blocks of the last stage or '
                    "norm='none'.")
        if checkpoint:
            self.load_checkpoint(checkpoint)

    def _check_token_path(self) -> str:
        """Which own token path the model supports: ``'vit'`` or ``'pit'``."""
        from timm.layers import HybridEmbed, PatchEmbed
        from timm.models.pit import PoolingVisionTransformer
        from timm.models.vision_transformer import VisionTransformer
        model = self.model
        where = (f"TimmBackbone: pos_embed={self.pos_embed_mode!r} with model_name="
                 f"{self.model_name!r} ({type(model).__name__})")
        if isinstance(model, PoolingVisionTransformer):
            return 'pit'
        if not isinstance(model, VisionTransformer):
            raise ValueError(
                f"{where}: only timm VisionTransformer models (ViT, hybrid R50+ViT, DeiT, "
                f"DeiT-3, ...) and PiT are supported; use pos_embed='timm' for this model.")
        if not isinstance(model.patch_embed, (PatchEmbed, HybridEmbed)):
            raise ValueError(f'{where}: unsupported patch embedding '
                             f'{type(model.patch_embed).__name__}; use pos_embed=\'timm\'.')
        if not isinstance(model.patch_drop, nn.Identity):
            raise ValueError(f'{where}: patch dropout removes tokens from the grid; '
                             'set patch_drop_rate=0.')
        return 'vit'

    def _resolve(self, index: int) -> int:
        if not -self.num_layers <= index < self.num_layers:
            raise ValueError(f'TimmBackbone: out_indices entry {index} is out of range for '
                             f'{self.num_layers} layers.')
        return index % self.num_layers

    def init_weights(self) -> None:
        """MMEngine's initialisation (timm's ``init_weights`` of the model and this module's
        ``init_cfg``), after which the weights loaded at build (``pretrained`` / ``checkpoint``)
        are put back: training starts from them, not from a re-drawn model."""
        if self._is_init:
            return
        loaded = None
        if self.weights_source != 'random initialisation':
            loaded = {k: v.detach().to('cpu', copy=True)
                      for k, v in self.model.state_dict().items()}
        super().init_weights()
        if loaded is not None:
            self.model.load_state_dict(loaded)
        elif pretrained_init_cfg(self.init_cfg):
            source = pretrained_init_cfg(self.init_cfg).get('checkpoint')
            self.weights_source = f"init_cfg Pretrained {source}"
        # The digest a rehearsal checks the run's start against (a resumed run then loads
        # its checkpoint over these weights).
        print_log(f'TimmBackbone({self.model_name}): initialised from {self.weights_source} '
                  f'(sha256 {state_digest(self.state_dict())[:16]})', logger='current')

    def load_checkpoint(self, checkpoint: str) -> None:
        state = strip_prefixes(load_state_dict_file(checkpoint))
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        # A classifier head in the file is expected (we build with num_classes=0), and so is
        # the learned position embedding a 'none' / 'cpe' backbone does not have.
        unexpected = [k for k in unexpected if not k.startswith(('head.', 'head_dist.', 'fc.'))
                      and not (k == 'pos_embed' and self.pos_embed_mode in ('none', 'cpe'))]
        if not state or len(missing) == len(self.model.state_dict()):
            raise ValueError(f'TimmBackbone: no weight in {checkpoint} matches '
                             f'{type(self.model).__name__}; is it the right model?')
        if missing or unexpected:
            print_log(f'TimmBackbone: loaded {checkpoint} with missing keys {missing} and '
                      f'unexpected keys {unexpected}', logger='current')
        self.weights_source = f'checkpoint {checkpoint}'

    def forward(self, x: torch.Tensor) -> Tuple:
        if self.channels_last and x.is_cuda:  # cuDNN then keeps the convolutions' outputs so
            x = x.contiguous(memory_format=torch.channels_last)
        indices = list(self.out_indices)
        if not self.is_vit:
            return tuple(self.model.forward_intermediates(
                x, indices=indices, intermediates_only=True))
        if self.token_path is None:
            feats = [ViTFeatures(prefix, grid) for grid, prefix in self.model.forward_intermediates(
                x, indices=indices, norm=self.norm == 'all', return_prefix_tokens=True,
                output_fmt='NCHW', intermediates_only=True)]
        else:
            feats = self._token_intermediates(x, indices, norm=self.norm == 'all')
        if self.norm == 'last' and indices[-1] == self.num_layers - 1:
            # The model's final norm on the last block: timm's forward_features output.
            last = feats[-1]
            feats[-1] = ViTFeatures.from_tokens(self.model.norm(last.tokens()),
                                                last.prefix.shape[1], *last.grid.shape[-2:])
        return tuple(feats)

    # Own token path (pos_embed other than 'timm').

    def _block_groups(self) -> List[Tuple[Optional[nn.Module], nn.Module, nn.Module]]:
        """(pool, pre-norm, blocks) per stage: one stage for ViT, PiT's stages."""
        if self.token_path == 'pit':
            return [(s.pool, s.norm, s.blocks) for s in self.model.transformers]
        return [(None, self.model.norm_pre, self.model.blocks)]

    def _embed(self, x: torch.Tensor) -> ViTFeatures:
        """Image -> prefix B x P x D and patch grid B x D x h x w, position embedding added."""
        model = self.model
        dpe = self.pos_embed_mode.startswith('dpe')
        mode = self.pos_embed_mode[len('dpe-'):]
        if self.token_path == 'pit':
            grid = model.patch_embed(x)
            if dpe:
                grid = grid + resize_grid_pos_embed(model.pos_embed, grid.shape[-2:], mode)
            return ViTFeatures(model.cls_token.expand(x.shape[0], -1, -1), model.pos_drop(grid))

        grid = self._patch_grid(x)
        b, d = grid.shape[:2]
        prefix = [getattr(model, name, None) for name in ('cls_token', 'dist_token', 'reg_token')]
        prefix = torch.cat([t.expand(b, -1, -1) for t in prefix if t is not None] +
                           [grid.new_zeros(b, 0, d)], dim=1)
        if dpe:
            n_prefix = 0 if model.no_embed_class else model.num_prefix_tokens
            gh, gw = model.patch_embed.grid_size
            if n_prefix:  # (B, P, D) + (1, 0, D) would broadcast to nothing
                prefix = prefix + model.pos_embed[:, :n_prefix]
            grid_pe = model.pos_embed[:, n_prefix:].reshape(1, gh, gw, d).permute(0, 3, 1, 2)
            grid = grid + resize_grid_pos_embed(grid_pe, grid.shape[-2:], mode)
        # Dropout is elementwise, so dropping prefix and grid apart equals timm's joint drop.
        return ViTFeatures(model.pos_drop(prefix), model.pos_drop(grid))

    def _patch_grid(self, x: torch.Tensor) -> torch.Tensor:
        """ViT patch embedding at any input size: B x 3 x H x W -> B x D x h x w."""
        from timm.layers import HybridEmbed
        embed = self.model.patch_embed
        if isinstance(embed, HybridEmbed):
            x = embed.backbone(x)
            if isinstance(x, (list, tuple)):
                x = x[-1]
            return embed.proj(pad_same(x, embed.patch_size))
        grid = embed.proj(pad_same(x, embed.patch_size))
        return embed.norm(grid.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def _token_intermediates(self, x: torch.Tensor, indices: List[int],
                             norm: bool) -> List[ViTFeatures]:
        """What timm's ``forward_intermediates`` gives, for the modes timm cannot run: the
        ViTFeatures of the blocks in ``indices``, each through the final norm when ``norm``.

        timm's VisionTransformer resamples its position embedding only bicubic with antialias
        (inside the private ``_pos_embed``), pads inputs bottom/right rather than TF-"same", sizes a
        hybrid's grid floor(H / 16) where its ResNet stem gives ceil(H / 16), and has no step
        between blocks for CPE; PiT's ``forward_intermediates`` returns whole stages without prefix
        tokens. So these modes run the timm modules block by block here.
        """
        prefix, grid = self._embed(x)
        p = prefix.shape[1]
        use_checkpoint = getattr(self.model, 'grad_checkpointing', False) and self.training
        outs, index = [], 0
        for pool, pre_norm, blocks in self._block_groups():
            if pool is not None:
                grid, prefix = pool(grid, prefix)
            h, w = grid.shape[-2:]
            tokens = pre_norm(ViTFeatures(prefix, grid).tokens())
            for block in blocks:
                tokens = grad_checkpoint(block, tokens, use_reentrant=False) \
                    if use_checkpoint else block(tokens)
                if index == 0 and self.cpe is not None:  # t <- t + DWConv3x3(t), patch tokens
                    front, patches = ViTFeatures.from_tokens(tokens, p, h, w)
                    tokens = ViTFeatures(front, patches + self.cpe(patches)).tokens()
                if index in indices:
                    outs.append(ViTFeatures.from_tokens(
                        self.model.norm(tokens) if norm else tokens, p, h, w))
                    if len(outs) == len(indices):
                        return outs
                index += 1
            prefix, grid = ViTFeatures.from_tokens(tokens, p, h, w)
        return outs
