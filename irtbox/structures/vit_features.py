"""The output of one vision-transformer layer, split into prefix tokens and patch grid."""
from typing import NamedTuple

import torch

__all__ = ['ViTFeatures']


class ViTFeatures(NamedTuple):
    """One transformer layer's tokens: the prefix tokens and the patch tokens as a map.

    ``TimmBackbone`` returns one per requested layer of a vision transformer; a named tuple,
    so ``prefix, grid = features`` unpacks.

    Fields:
        prefix: B x P x D, the tokens before the patches in timm's order: CLS
            (index 0), then the distillation token (DeiT-distilled, PiT) and
            register tokens when the model has them. P may be 0.
        grid: B x D x h x w, the patch tokens on the h x w token grid.
    """

    prefix: torch.Tensor
    grid: torch.Tensor

    @classmethod
    def from_tokens(cls, tokens: torch.Tensor, num_prefix: int, height: int,
                    width: int) -> 'ViTFeatures':
        """B x (P + h w) x D tokens, prefix first -> (B x P x D, B x D x h x w)."""
        grid = tokens[:, num_prefix:].transpose(1, 2).reshape(tokens.shape[0], -1, height, width)
        return cls(tokens[:, :num_prefix], grid)

    def tokens(self) -> torch.Tensor:
        """The inverse of :meth:`from_tokens`: B x (P + h w) x D."""
        return torch.cat([self.prefix, self.grid.flatten(2).transpose(1, 2)], dim=1)
