"""Spread of per-sample gradient directions (IRT Fig. 4: γ = ||Cov(∇_z L_contr)||_*)."""
from .checks import ArrayLike, as_float_matrix

__all__ = ['gradient_direction_spread']


def gradient_direction_spread(grads: ArrayLike) -> float:
    """γ = ||Cov(d)||_*, the nuclear norm of the covariance of gradient directions.

    El-Nouby et al., "Training Vision Transformers for Image Retrieval", Sec. 4
    and Fig. 4: a measure of gradient noise, higher when the per-sample
    gradients of the loss point in more scattered directions.

    - g_i (row i of ``grads``) is the gradient ∇_{z_i} L of the loss with
      respect to the embedding z_i of sample i;
    - rows whose gradient is exactly zero (samples with no active pair, e.g.
      every negative below the margin) have no direction and are dropped;
      the n remaining rows give the directions d_i = g_i / ||g_i||;
    - C = (1 / (n − 1)) Σ_i (d_i − d̄)(d_i − d̄)ᵀ, the unbiased sample
      covariance (``np.cov``'s default; the paper does not say which);
    - γ = ||C||_*, the sum of the singular values of C.

    C is symmetric positive semi-definite, so ||C||_* = trace(C) = n / (n − 1) · (1 − ||d̄||²)
    for unit d_i: 0 when all directions agree, at most n / (n − 1). It is computed as
    ||X||_F² / (n − 1) with X the n x D centred directions, in float64, without forming the
    D x D matrix C (an SVD at every step would cost more than the step).

    Args:
        grads: B x D gradients (array or tensor), one row per sample.

    Returns:
        γ as a float; NaN when fewer than 2 rows are non-zero (no covariance).
    """
    g = as_float_matrix(grads, 'grads', keep_float64=True).double()
    norms = g.norm(dim=1)
    keep = norms > 0
    if int(keep.sum()) < 2:
        return float('nan')
    directions = g[keep] / norms[keep, None]
    centred = directions - directions.mean(dim=0)
    return float(centred.square().sum() / (len(centred) - 1))
