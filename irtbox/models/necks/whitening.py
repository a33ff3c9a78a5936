"""Whitening of the final descriptor: learned from matching pairs ("Lw") or PCA-whitening."""
from typing import Optional, Sequence

import torch

from irtbox.evaluation.functional.whitening import learn_whitening, pca_whitening
from irtbox.registry import MODELS
from .projection import FittedProjection

__all__ = ['LearnedWhitening']


@MODELS.register_module()
class LearnedWhitening(FittedProjection):
    """``x' = P[:d] (x − m)`` on the final descriptor (then L2-normalised by the retriever).

    ``method='learned'``: the supervised whitening "Lw" of Radenović et al.
    (TPAMI 2018; docs/protocols.md, "Learned whitening"): m is the mean of the query descriptors of the
    matching pairs, P whitens the pair differences and then rotates by the
    eigenvectors of the whitened data (no eigenvalue scaling).
    ``method='pca'``: unsupervised PCA-whitening. Learned by ``WhiteningFitHook`` from
    descriptors extracted as at test time; set as ``model.whitening=dict(type=...)``.

    Shapes: B x in_dim -> B x out_dim.

    Args:
        in_dim: descriptor dimension.
        out_dim: dimensions kept (``None``: all; 128 for the ▷128 rows).
        method: 'learned' (needs query/positive pairs) or 'pca'.
    """

    fit_hook = 'WhiteningFitHook'

    def __init__(self, in_dim: int, out_dim: Optional[int] = None, method: str = 'learned'):
        super().__init__(in_dim, out_dim or in_dim)
        if method not in ('learned', 'pca'):
            raise ValueError(f"LearnedWhitening: method must be 'learned' or 'pca', got {method!r}")
        self.method = method

    @torch.no_grad()
    def fit(self, x: torch.Tensor, qidxs: Optional[Sequence[int]] = None,
            pidxs: Optional[Sequence[int]] = None) -> None:
        """Learn from N x in_dim descriptors (and, for 'learned', pair indices into them)."""
        self.check_input(x)
        x = x.double()
        if self.method == 'learned':
            if qidxs is None or pidxs is None:
                raise ValueError('LearnedWhitening(method="learned") needs query/positive pairs '
                                 '(qidxs, pidxs): give the whitening set (SfMWhitenDataset) to '
                                 'WhiteningFitHook, or use method="pca".')
            mean, projection = learn_whitening(x, qidxs, pidxs)
        else:
            mean, projection = pca_whitening(x)
        self.set_projection(torch.as_tensor(mean).double(), torch.as_tensor(projection).double())

    def extra_repr(self) -> str:
        return f'in_dim={self.in_dim}, out_dim={self.out_dim}, method={self.method!r}'
