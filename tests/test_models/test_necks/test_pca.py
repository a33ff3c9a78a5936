import numpy as np
import pytest
import torch

from irtbox.models.necks import PCAReduction, fit_pca


def test_fit_pca_matches_numpy_svd():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6))
    mean, comps, eigvals = fit_pca(torch.from_numpy(x), 3)
    centred = x - x.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(mean.numpy(), x.mean(0))
    np.testing.assert_allclose(eigvals.numpy(), s[:3] ** 2 / (len(x) - 1), rtol=1e-8)
    # Same subspace and directions up to sign.
    np.testing.assert_allclose(np.abs(comps.numpy() @ vt[:3].T), np.eye(3), atol=1e-8)


def test_neck_projects_in_eval_and_passes_in_training():
    torch.manual_seed(0)
    x = torch.randn(50, 8)
    neck = PCAReduction(in_dim=8, out_dim=2)
    with pytest.raises(RuntimeError, match='not fitted'):
        neck.eval()(x)
    neck.fit(x)
    y = neck.eval()(x)
    assert y.shape == (50, 2)
    # Projections are uncorrelated with variances equal to the eigenvalues.
    cov = torch.cov(y.T)
    torch.testing.assert_close(cov, torch.diag(neck.eigenvalues.float()), atol=1e-4, rtol=1e-4)
    assert neck.train()(x) is x
    with neck.passthrough():
        assert neck.eval()(x) is x


def test_state_dict_round_trip():
    neck = PCAReduction(4, 2)
    neck.fit(torch.randn(10, 4))
    other = PCAReduction(4, 2)
    other.load_state_dict(neck.state_dict())
    x = torch.randn(3, 4)
    torch.testing.assert_close(other.eval()(x), neck.eval()(x))


def test_bad_dimensions():
    with pytest.raises(ValueError, match='out_dim'):
        PCAReduction(4, 8)
    with pytest.raises(ValueError, match='dimension 3'):
        PCAReduction(4, 2).fit(torch.randn(10, 3))
    with pytest.raises(ValueError, match='min'):
        fit_pca(torch.randn(2, 4), 3)
