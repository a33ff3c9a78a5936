"""PCA reduction learned from training-set descriptors (IRT's "▷128" rows)."""
from typing import Tuple

import torch

from irtbox.registry import MODELS
from .projection import FittedProjection

__all__ = ['fit_pca', 'PCAReduction']


def fit_pca(x: torch.Tensor, out_dim: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Principal components of the rows of ``x`` (N x D), in float64.

    Returns ``(mean D, components out_dim x D, eigenvalues out_dim)``, components
    sorted by decreasing variance, sign fixed so that each component's largest
    coordinate is positive (so refits are reproducible).
    """
    if x.dim() != 2:
        raise ValueError(f'fit_pca expects an N x D matrix, got shape {tuple(x.shape)}')
    n, d = x.shape
    if out_dim > min(n, d):
        raise ValueError(f'fit_pca: cannot keep {out_dim} components from {n} samples of '
                         f'dimension {d}; need out_dim <= min(N, D).')
    x = x.double()
    mean = x.mean(dim=0)
    cov = (x - mean).T @ (x - mean) / max(n - 1, 1)
    eigvals, eigvecs = torch.linalg.eigh(cov)
    order = torch.argsort(eigvals, descending=True)[:out_dim]
    comps = eigvecs[:, order].T
    signs = torch.sign(comps.gather(1, comps.abs().argmax(dim=1, keepdim=True)))
    return mean, comps * signs, eigvals[order].clamp(min=0)


@MODELS.register_module()
class PCAReduction(FittedProjection):
    """Project B x in_dim descriptors onto their first ``out_dim`` principal components.

    ``y = P (x − m)`` (optionally whitened, ``y_k /= sqrt(λ_k + eps)``), B x out_dim. ``m``,
    ``P`` and the eigenvalues are buffers (in checkpoints), learned by ``PCAFitHook`` from a
    training set's descriptors (IRT: PCA before L2 normalisation). In training the neck is the
    identity (IRT trains at full dimension) unless ``train_reduced=True``.

    Args:
        in_dim: input descriptor dimension.
        out_dim: number of components kept.
        whiten: divide each component by the square root of its eigenvalue.
        train_reduced: apply the projection in training mode too.
    """

    fit_hook = 'PCAFitHook'

    def __init__(self, in_dim: int, out_dim: int, whiten: bool = False,
                 train_reduced: bool = False, eps: float = 1e-9):
        super().__init__(in_dim, out_dim, train_projected=train_reduced)
        self.whiten, self.eps = whiten, eps
        self.register_buffer('eigenvalues', torch.zeros(out_dim))

    @torch.no_grad()
    def fit(self, x: torch.Tensor) -> None:
        """Learn the projection from N x in_dim descriptors."""
        self.check_input(x)
        mean, comps, eigvals = fit_pca(x, self.out_dim)
        if self.whiten:
            comps = comps / (eigvals + self.eps).sqrt()[:, None]
        self.eigenvalues.copy_(eigvals)
        self.set_projection(mean, comps)
