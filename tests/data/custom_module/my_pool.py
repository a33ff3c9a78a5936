"""A module registered outside irtbox (docs/customize.md's custom_imports example)."""
import torch.nn as nn

from irtbox.registry import MODELS


@MODELS.register_module()
class TopKPool(nn.Module):
    """Mean of the k largest activations per channel. B x C x h x w -> B x C."""

    def __init__(self, k=4):
        super().__init__()
        self.k = k

    def forward(self, feats):
        grid = feats[-1].grid  # ViT: ViTFeatures(prefix, grid)
        return grid.flatten(2).topk(self.k, dim=-1).values.mean(-1)
