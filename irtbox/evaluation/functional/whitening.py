"""Descriptor whitening: supervised "Lw" from matching pairs, and PCA-whitening.

Descriptors are ROWS here: X is N x D (the official code uses D x N columns; docs/protocols.md,
"Learned whitening (Lw)"). Computations are in float64; numpy in, numpy out; tensor in, float64
tensor on the input's device out.
"""
import warnings
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

from irtbox.utils.checks import check_int
from .checks import ArrayLike

__all__ = ['learn_whitening', 'pca_whitening', 'apply_whitening']

# Diagonal loading of a non-positive-definite matrix starts here and grows x10
# (the regularisation of Radenović et al.'s whitening code).
_FIRST_JITTER = 1e-10
# PCA-whitening floors eigenvalues at this fraction of the largest one.
_PCA_EIG_FLOOR = 1e-10


def learn_whitening(X: ArrayLike, qidxs: Sequence[int],
                    pidxs: Sequence[int]) -> Tuple[ArrayLike, ArrayLike]:
    """Learned whitening "Lw" from matching pairs (Radenović et al., TPAMI 2018, Sec. 3.3).

    With rows x_i of X (N x D) and the n pairs (q_j, p_j) = (qidxs[j], pidxs[j]):

    - m = mean of the query descriptors x_{q_j};
    - S = (1/n) Σ_j (x_{q_j} − x_{p_j})(x_{q_j} − x_{p_j})ᵀ (D x D);
    - L = lower Cholesky factor of S + αI, α = 0 if S is positive definite, else the first of 1e-10,
      1e-9, ... that makes it so (with a warning); P1 = L⁻¹, so that P1 S P1ᵀ = I;
    - C = Σ_i P1 (x_i − m)(x_i − m)ᵀ P1ᵀ over ALL N descriptors (as in
      docs/protocols.md and the official code; m is still the query mean);
      eigenvectors V of C, eigenvalues in decreasing order;
    - P = Vᵀ P1 (a rotation of the pair-whitened space, no eigenvalue scaling).

    Hence P S Pᵀ = I (rows of P orthonormal in the metric S) and P C' Pᵀ
    is diagonal and decreasing, C' = Σ_i (x_i − m)(x_i − m)ᵀ. Eigenvector
    signs are arbitrary. Apply with :func:`apply_whitening`.

    Args:
        X: N x D descriptors (array or tensor), extracted as at test time.
        qidxs, pidxs: equal-length indices of matching query / positive rows.

    Returns:
        (m, P): m of shape (D,), P of shape (D, D), float64.
    """
    x, back = _as_float64(X, 'X')
    qidxs = _pair_indices(qidxs, 'qidxs', len(x))
    pidxs = _pair_indices(pidxs, 'pidxs', len(x))
    if len(qidxs) != len(pidxs):
        raise ValueError(f'learn_whitening: qidxs has {len(qidxs)} entries but pidxs has '
                         f'{len(pidxs)}; expected aligned query/positive pairs.')
    if len(qidxs) == 0:
        raise ValueError('learn_whitening: no query/positive pairs; expected at least one.')
    m = x[qidxs].mean(axis=0)
    diff = x[qidxs] - x[pidxs]
    S = diff.T @ diff / len(diff)
    P1 = np.linalg.inv(_cholesky(S))
    y = (x - m) @ P1.T
    eigval, eigvec = np.linalg.eigh(y.T @ y)
    order = np.argsort(eigval)[::-1]
    P = eigvec[:, order].T @ P1
    return back(m), back(P)


def pca_whitening(X: ArrayLike, dim: Optional[int] = None) -> Tuple[ArrayLike, ArrayLike]:
    """PCA-whitening, the unsupervised alternative to :func:`learn_whitening`.

    m = mean of the rows of X; C = (1/N) Σ_i (x_i − m)(x_i − m)ᵀ with
    eigenpairs (λ_k, v_k), λ decreasing; P = diag(λ_k^(-1/2)) Vᵀ (row k is
    v_k / √λ_k), so that P C Pᵀ = I. Eigenvalues below 1e-10·λ_max (more
    dimensions than the descriptors span, N <= D) are raised to that floor,
    with a warning: those directions carry no information and get a large
    but finite scale; keep fewer with ``dim``.

    Args:
        X: N x D descriptors (array or tensor).
        dim: rows of P kept (leading components); ``None``: all D.

    Returns:
        (m, P): m of shape (D,), P of shape (dim or D, D), float64.
    """
    x, back = _as_float64(X, 'X')
    n, d = x.shape
    if n < 2:
        raise ValueError(f'pca_whitening: X has {n} row(s); expected at least 2 descriptors.')
    dim = check_int(dim, 'dim', 1, d, allow_none=True)
    m = x.mean(axis=0)
    xc = x - m
    eigval, eigvec = np.linalg.eigh(xc.T @ xc / n)
    order = np.argsort(eigval)[::-1][:dim]
    eigval, eigvec = eigval[order], eigvec[:, order]
    if eigval[0] <= 0:
        raise ValueError('pca_whitening: the descriptors are all identical (zero covariance); '
                         'nothing to whiten.')
    floor = _PCA_EIG_FLOOR * eigval[0]
    small = eigval < floor
    if small.any():
        warnings.warn(f'pca_whitening: {int(small.sum())} of {len(eigval)} kept directions '
                      f'have (almost) no variance in the {n} descriptors; their eigenvalues '
                      f'are floored at {floor:.1e}. Use more descriptors or a smaller dim.')
        eigval = np.maximum(eigval, floor)
    P = eigvec.T / np.sqrt(eigval)[:, None]
    return back(m), back(P)


def apply_whitening(X: ArrayLike, m: ArrayLike, P: ArrayLike,
                    dim: Optional[int] = None) -> ArrayLike:
    """x' = P[:dim] (x − m), then L2-normalised, for every row x of X.

    Plain L2 normalisation (a zero vector stays zero), where the official
    code divides by (norm + 1e-6).

    Args:
        X: N x D descriptors.
        m: (D,) mean; P: (D', D) projection (from :func:`learn_whitening` or :func:`pca_whitening`).
        dim: leading rows of P used; ``None``: all of them (▷128: 128).

    Returns:
        N x dim float64, unit rows; numpy for numpy X, a tensor on X's device for tensor X.
    """
    as_tensor = isinstance(X, torch.Tensor)
    x = X.detach().double() if as_tensor else torch.from_numpy(
        np.ascontiguousarray(X, dtype=np.float64))
    m_t = torch.as_tensor(m, dtype=torch.float64, device=x.device)
    P_t = torch.as_tensor(P, dtype=torch.float64, device=x.device)
    _check_apply(tuple(x.shape), tuple(m_t.shape), tuple(P_t.shape), dim)
    # eps: only an exactly zero row (a descriptor equal to the mean) is left as it is.
    out = torch.nn.functional.normalize((x - m_t) @ P_t[:dim].T, dim=1, eps=1e-300)
    return out if as_tensor else out.numpy()


def _cholesky(S: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of S + αI with the smallest α in {0, 1e-10, 1e-9, ...} that works.

    α needs never exceed the largest |eigenvalue| of the symmetric S (bounded
    by its Frobenius norm), which bounds the loop.
    """
    S = (S + S.T) / 2
    bound = np.linalg.norm(S) + 1.0
    alpha = 0.0
    while True:
        try:
            L = np.linalg.cholesky(S + alpha * np.eye(len(S)))
        except np.linalg.LinAlgError:
            alpha = _FIRST_JITTER if alpha == 0 else alpha * 10
            if alpha > 10 * bound:
                raise ValueError('learn_whitening: the covariance of the pair differences '
                                 'cannot be made positive definite.') from None
            continue
        if alpha > 0:
            warnings.warn(f'learn_whitening: the covariance of the pair differences is not '
                          f'positive definite (fewer independent pairs than dimensions?); '
                          f'added {alpha:.0e} x I before the Cholesky factorisation.')
        return L


def _as_float64(X: ArrayLike, name: str):
    """X as a finite 2-D float64 numpy array, and a function that returns
    results in X's kind (numpy, or a float64 tensor on X's device)."""
    tensor = isinstance(X, torch.Tensor)
    x = X.detach().cpu().double().numpy() if tensor else np.asarray(X, dtype=np.float64)

    def back(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(X.device) if tensor else a

    if x.ndim != 2:
        raise ValueError(f'{name} must be 2-D (N descriptors x D), got shape {x.shape}.')
    if not np.isfinite(x).all():
        raise ValueError(f'{name} contains NaN or infinite values.')
    return x, back


def _pair_indices(idx, name: str, n: int) -> np.ndarray:
    if isinstance(idx, torch.Tensor):
        idx = idx.detach().cpu().numpy()
    arr = np.asarray(idx)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f'learn_whitening: {name} must be a 1-D list of integer row indices '
                         f'into X, got shape {arr.shape} and dtype {arr.dtype}.')
    bad = (arr < 0) | (arr >= n)
    if bad.any():
        raise ValueError(f'learn_whitening: {name} holds index {arr[bad][0]}, outside the '
                         f'{n} rows of X.')
    return arr.astype(np.int64)


def _check_apply(x_shape, m_shape, P_shape, dim) -> None:
    if len(x_shape) != 2:
        raise ValueError(f'apply_whitening: X must be 2-D (N x D), got shape {x_shape}.')
    d = x_shape[1]
    if m_shape != (d, ) or len(P_shape) != 2 or P_shape[1] != d:
        raise ValueError(f'apply_whitening: X has dimension {d}, so m must have shape ({d},) '
                         f'and P shape (D\', {d}); got m {m_shape} and P {P_shape}.')
    check_int(dim, 'dim', 1, P_shape[0], allow_none=True)
