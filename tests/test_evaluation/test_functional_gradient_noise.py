"""gradient_direction_spread: γ = ||Cov(gradient directions)||_* (IRT Fig. 4)."""
import math

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional.gradient_noise import gradient_direction_spread


def reference_gamma(grads):
    """Independent reading: drop zero rows, normalise, the unbiased covariance, sum of singular
    values. Cov = xᵀx / (n - 1) of the centred directions x has the nonzero singular values of
    x xᵀ / (n - 1), so the smaller of the two is decomposed (n x n for 5 x 2048 gradients, not
    2048 x 2048: seconds)."""
    g = np.asarray(grads, dtype=np.float64)
    g = g[np.linalg.norm(g, axis=1) > 0]
    d = g / np.linalg.norm(g, axis=1, keepdims=True)
    if d.shape[0] >= d.shape[1]:
        cov = np.atleast_2d(np.cov(d, rowvar=False))
    else:
        x = d - d.mean(axis=0)
        cov = x @ x.T / (len(x) - 1)
    return np.linalg.svd(cov, compute_uv=False).sum()


@pytest.mark.parametrize('shape,seed', [((64, 384), 0), ((5, 2048), 1), ((300, 8), 2),
                                         ((7, 1), 3)])
def test_matches_numpy_nuclear_norm(shape, seed):
    rng = np.random.default_rng(seed)
    # Anisotropic gradients: the directions are far from uniform.
    grads = rng.normal(size=shape) * np.linspace(0.1, 3, shape[1]) + 0.5
    expected = reference_gamma(grads)
    assert gradient_direction_spread(grads) == pytest.approx(expected, rel=1e-10)
    assert gradient_direction_spread(torch.from_numpy(grads).float()) == pytest.approx(
        expected, rel=1e-5)


def test_nuclear_norm_is_trace_and_closed_form():
    """For unit directions: ||C||_* = trace(C) = n/(n-1) (1 - ||mean direction||²)."""
    rng = np.random.default_rng(4)
    grads = rng.normal(size=(20, 6)) + 1.0
    d = grads / np.linalg.norm(grads, axis=1, keepdims=True)
    cov = np.cov(d, rowvar=False)
    nuclear = np.linalg.norm(cov, ord='nuc')
    assert nuclear == pytest.approx(np.trace(cov), rel=1e-12)
    closed = 20 / 19 * (1 - np.sum(d.mean(axis=0) ** 2))
    assert gradient_direction_spread(grads) == pytest.approx(closed, rel=1e-12)
    assert gradient_direction_spread(grads) == pytest.approx(nuclear, rel=1e-12)


def test_equal_directions_give_zero():
    # Same direction, different lengths: no spread at all.
    grads = np.outer([1.0, 2.0, 0.5, 7.0], [3.0, -1.0, 2.0])
    assert gradient_direction_spread(grads) == pytest.approx(0.0, abs=1e-14)


def test_two_opposite_directions():
    # d = ±e: mean 0, C = (e eᵀ + e eᵀ) / (2 - 1) = 2 e eᵀ, whose nuclear norm is 2.
    grads = np.array([[0.0, 3.0, 4.0], [0.0, -0.6, -0.8]])
    assert gradient_direction_spread(grads) == pytest.approx(2.0, rel=1e-12)


def test_zero_rows_are_dropped():
    rng = np.random.default_rng(5)
    grads = rng.normal(size=(6, 4))
    padded = np.insert(grads, [0, 3, 6], 0.0, axis=0)
    assert gradient_direction_spread(padded) == pytest.approx(
        gradient_direction_spread(grads), rel=1e-12)


@pytest.mark.parametrize('grads', [np.zeros((4, 3)), np.array([[1.0, 2.0], [0.0, 0.0]]),
                                   np.ones((1, 5)), np.zeros((0, 3))])
def test_fewer_than_two_directions_is_nan(grads):
    assert math.isnan(gradient_direction_spread(grads))


@pytest.mark.parametrize('grads,error,match', [
    (np.ones(3), ValueError, 'must be 2-D'),
    (np.array([[1.0, np.nan], [1.0, 2.0]]), ValueError, 'NaN or infinite'),
    ([[1.0, 2.0]], TypeError, 'numpy array or a torch tensor'),
])
def test_bad_input(grads, error, match):
    with pytest.raises(error, match=f'^grads .*{match}'):
        gradient_direction_spread(grads)
