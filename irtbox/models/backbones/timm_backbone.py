"""A wrapper that turns any timm model into an irtbox backbone."""
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmengine.logging import print_log
from mmengine.model import BaseModule

from irtbox.registry import MODELS
from irtbox.utils.checkpoint import load_state_dict_file


@MODELS.register_module()
class TimmBackbone(BaseModule):
    """Any timm model, returning the features of chosen layers.

    Vision transformers (models with ``forward_intermediates`` and prefix tokens,
    e.g. ``deit_small_patch16_224``) give, for each layer in ``out_indices``,
    a pair ``(prefix, grid)``: ``prefix`` is B x P x D (P = 1 for CLS, 2 with a
    distillation token) and ``grid`` is B x D x h x w. Convolutional networks give
    B x C x h x w maps. The forward returns a tuple with one entry per layer.

    For the last layer the final norm is applied, so its CLS token is the one
    timm's ``forward_features`` yields (the IRT descriptor); ``norm`` applies it
    to the earlier layers too.

    Args:
        model_name: any name ``timm.list_models()`` knows.
        pretrained: load timm's pretrained weights (needs the hub).
        checkpoint: a local path or an http(s) URL of a state dict for the timm
            model (keys may carry a ``state_dict``/``model`` wrapper or a
            ``module.``/``backbone.`` prefix). Loaded with ``weights_only``.
        out_indices: layers to return; negative indices count from the end.
        norm: apply the final norm to every returned layer, not only the last.
        **timm_kwargs: passed to ``timm.create_model`` (e.g. ``img_size``,
            ``depth``, ``drop_path_rate``).
    """

    def __init__(self,
                 model_name: str,
                 pretrained: bool = False,
                 checkpoint: Optional[str] = None,
                 out_indices: Union[int, Sequence[int]] = -1,
                 norm: bool = False,
                 init_cfg=None,
                 **timm_kwargs):
        super().__init__(init_cfg=init_cfg)
        import timm
        if model_name not in timm.list_models(pretrained=False) and \
                model_name.split('.')[0] not in timm.list_models(pretrained=False):
            raise ValueError(
                f'TimmBackbone: unknown timm model_name={model_name!r}; see timm.list_models().')
        if pretrained and checkpoint:
            raise ValueError('TimmBackbone: give either pretrained=True or checkpoint=..., not both.')
        self.model = timm.create_model(
            model_name, pretrained=pretrained, num_classes=0, **timm_kwargs)
        self.is_vit = hasattr(self.model, 'num_prefix_tokens') and hasattr(self.model, 'blocks')
        self.num_layers = len(self.model.blocks) if self.is_vit else len(
            self.model.feature_info)
        indices = [out_indices] if isinstance(out_indices, int) else list(out_indices)
        self.out_indices = tuple(sorted(self._resolve(i) for i in indices))
        self.norm = norm
        self.embed_dim = self.model.num_features
        if checkpoint:
            self.load_checkpoint(checkpoint)

    def _resolve(self, index: int) -> int:
        resolved = index + self.num_layers if index < 0 else index
        if not 0 <= resolved < self.num_layers:
            raise ValueError(f'TimmBackbone: out_indices entry {index} is out of range for '
                             f'{self.num_layers} layers.')
        return resolved

    def load_checkpoint(self, checkpoint: str) -> None:
        state = load_state_dict_file(checkpoint)
        for prefix in ('module.', 'backbone.model.', 'backbone.', 'model.'):
            if state and all(k.startswith(prefix) for k in state):
                state = {k[len(prefix):]: v for k, v in state.items()}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        # A classifier head in the file is expected (we build with num_classes=0).
        unexpected = [k for k in unexpected if not k.startswith(('head.', 'head_dist.', 'fc.'))]
        if not state or len(missing) == len(self.model.state_dict()):
            raise ValueError(f'TimmBackbone: no weight in {checkpoint} matches '
                             f'{type(self.model).__name__}; is it the right model?')
        if missing or unexpected:
            print_log(f'TimmBackbone: loaded {checkpoint} with missing keys {missing} and '
                      f'unexpected keys {unexpected}', logger='current')

    def forward(self, x: torch.Tensor) -> Tuple:
        if self.is_vit:
            last = self.num_layers - 1
            feats = self.model.forward_intermediates(
                x, indices=list(self.out_indices), norm=self.norm,
                return_prefix_tokens=True, output_fmt='NCHW', intermediates_only=True)
            outs = []
            for index, (grid, prefix) in zip(self.out_indices, feats):
                if index == last and not self.norm:
                    prefix, grid = self._final_norm(prefix, grid)
                outs.append((prefix, grid))
            return tuple(outs)
        return tuple(self.model.forward_intermediates(
            x, indices=list(self.out_indices), intermediates_only=True))

    def _final_norm(self, prefix: torch.Tensor, grid: torch.Tensor):
        b, d, h, w = grid.shape
        tokens = torch.cat([prefix, grid.flatten(2).transpose(1, 2)], dim=1)
        tokens = self.model.norm(tokens)
        p = prefix.shape[1]
        return tokens[:, :p], tokens[:, p:].transpose(1, 2).reshape(b, d, h, w)
