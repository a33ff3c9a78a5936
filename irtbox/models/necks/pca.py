"""PCA reduction learned from training-set descriptors (IRT's "▷128" rows)."""
from contextlib import contextmanager
from typing import Tuple

import torch
import torch.nn as nn

from irtbox.registry import MODELS


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
class PCAReduction(nn.Module):
    """Project B x in_dim descriptors onto their first ``out_dim`` principal components.

    ``y = P (x − m)`` (optionally whitened, ``y_k /= sqrt(λ_k + eps)``), B x out_dim.
    ``m``, ``P`` and the eigenvalues are buffers, so they are stored in and
    restored from checkpoints; they are learned by ``PCAFitHook`` from the
    descriptors of a training set (IRT: PCA before L2 normalisation).

    During training the neck passes descriptors through unchanged (IRT trains at
    full dimension and reduces afterwards) unless ``train_reduced=True``.

    Args:
        in_dim: input descriptor dimension.
        out_dim: number of components kept.
        whiten: divide each component by the square root of its eigenvalue.
        train_reduced: apply the projection in training mode too.
    """

    def __init__(self, in_dim: int, out_dim: int, whiten: bool = False,
                 train_reduced: bool = False, eps: float = 1e-9):
        super().__init__()
        if not 0 < out_dim <= in_dim:
            raise ValueError(f'PCAReduction: need 0 < out_dim <= in_dim, got out_dim={out_dim}, '
                             f'in_dim={in_dim}')
        self.in_dim, self.out_dim = in_dim, out_dim
        self.whiten, self.train_reduced, self.eps = whiten, train_reduced, eps
        self.register_buffer('mean', torch.zeros(in_dim))
        self.register_buffer('components', torch.zeros(out_dim, in_dim))
        self.register_buffer('eigenvalues', torch.zeros(out_dim))
        self.register_buffer('fitted', torch.tensor(False))
        self._passthrough = False

    @torch.no_grad()
    def fit(self, x: torch.Tensor) -> None:
        """Learn the projection from N x in_dim descriptors."""
        if x.shape[-1] != self.in_dim:
            raise ValueError(f'PCAReduction.fit: descriptors have dimension {x.shape[-1]}, '
                             f'the neck expects in_dim={self.in_dim}')
        mean, comps, eigvals = fit_pca(x, self.out_dim)
        self.mean.copy_(mean)
        self.components.copy_(comps)
        self.eigenvalues.copy_(eigvals)
        self.fitted.fill_(True)

    @contextmanager
    def passthrough(self):
        """Within this context the neck is the identity (used while collecting its inputs)."""
        self._passthrough = True
        try:
            yield self
        finally:
            self._passthrough = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._passthrough or (self.training and not self.train_reduced):
            return x
        if not bool(self.fitted):
            raise RuntimeError(
                'PCAReduction is not fitted: add dict(type="PCAFitHook", ...) to custom_hooks '
                'so it is learned from the training set, or load a checkpoint that holds it.')
        y = (x - self.mean.to(x.dtype)) @ self.components.to(x.dtype).T
        if self.whiten:
            y = y / (self.eigenvalues.to(x.dtype) + self.eps).sqrt()
        return y
