import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import apply_whitening, learn_whitening, pca_whitening


def synthetic_pairs(seed=0, n_clusters=60, per_cluster=5, dim=6):
    """Descriptors of clusters (3D models) with anisotropic, correlated
    within-cluster noise; matching pairs inside the clusters."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim)) * 3
    mix = rng.normal(size=(dim, dim)) * np.linspace(0.2, 2, dim)
    x = np.repeat(centres, per_cluster, axis=0)
    x += rng.normal(size=x.shape) @ mix
    qidxs, pidxs = [], []
    for c in range(n_clusters):
        members = c * per_cluster + np.arange(per_cluster)
        for a in range(per_cluster - 1):
            qidxs.append(members[a])
            pidxs.append(members[a + 1])
    return x, np.array(qidxs), np.array(pidxs)


def test_learned_whitening_whitens_matching_pairs():
    x, qidxs, pidxs = synthetic_pairs()
    m, P = learn_whitening(x, qidxs, pidxs)
    assert m.dtype == np.float64 and P.dtype == np.float64
    assert m.shape == (6, ) and P.shape == (6, 6)
    np.testing.assert_allclose(m, x[qidxs].mean(axis=0), atol=1e-12)
    # Whitened differences of matching pairs have identity covariance ...
    diff = (x[qidxs] - x[pidxs]) @ P.T
    np.testing.assert_allclose(diff.T @ diff / len(diff), np.eye(6), atol=1e-9)
    # ... i.e. P's rows are orthonormal in the metric S of the pair differences.
    raw = x[qidxs] - x[pidxs]
    S = raw.T @ raw / len(raw)
    np.testing.assert_allclose(P @ S @ P.T, np.eye(6), atol=1e-9)
    # The rotation diagonalises the centred data, variances decreasing.
    y = (x - m) @ P.T
    C = y.T @ y
    off = C - np.diag(np.diag(C))
    assert np.abs(off).max() < 1e-8 * np.abs(C).max()
    assert (np.diff(np.diag(C)) < 0).all()
    # No eigenvalue scaling: P = V^T L^-1 with V orthogonal, so P^T P = S^-1.
    np.testing.assert_allclose(P.T @ P, np.linalg.inv(S), rtol=1e-8, atol=1e-10)


def test_learned_whitening_torch_in_torch_out():
    x, qidxs, pidxs = synthetic_pairs(seed=1)
    m, P = learn_whitening(x, qidxs, pidxs)
    m_t, P_t = learn_whitening(torch.from_numpy(x).float(), torch.from_numpy(qidxs),
                               list(pidxs))
    assert isinstance(m_t, torch.Tensor) and m_t.dtype == torch.float64
    np.testing.assert_allclose(m_t.numpy(), m, atol=1e-5)
    # Eigenvector signs are arbitrary: compare up to the sign of each row.
    signs = np.sign(np.sum(P_t.numpy() * P, axis=1))
    np.testing.assert_allclose(P_t.numpy() * signs[:, None], P, rtol=1e-4, atol=1e-4)


def test_singular_pair_covariance_gets_diagonal_loading():
    x, qidxs, pidxs = synthetic_pairs(seed=2)
    # Three pairs in six dimensions: S has rank 3.
    with pytest.warns(UserWarning, match='not positive definite'):
        m, P = learn_whitening(x, qidxs[:3], pidxs[:3])
    assert np.isfinite(P).all()
    raw = x[qidxs[:3]] - x[pidxs[:3]]
    S = raw.T @ raw / 3
    # Whitened within the span of the pairs: P S P^T is a projection (eigenvalues 0 or 1).
    ev = np.linalg.eigvalsh(P @ S @ P.T)
    np.testing.assert_allclose(np.sort(ev), [0, 0, 0, 1, 1, 1], atol=1e-4)


def test_apply_whitening():
    x, qidxs, pidxs = synthetic_pairs(seed=3)
    m, P = learn_whitening(x, qidxs, pidxs)
    out = apply_whitening(x, m, P)
    assert out.shape == x.shape and out.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1, atol=1e-12)
    direct = (x - m) @ P.T
    np.testing.assert_allclose(out, direct / np.linalg.norm(direct, axis=1, keepdims=True),
                               atol=1e-12)
    # ▷3: the first 3 rows of P, renormalised.
    out3 = apply_whitening(x, m, P, dim=3)
    assert out3.shape == (len(x), 3)
    np.testing.assert_allclose(out3, direct[:, :3] / np.linalg.norm(direct[:, :3], axis=1,
                                                                     keepdims=True), atol=1e-12)
    # Tensors in, float64 tensor out; m and P may be either kind.
    out_t = apply_whitening(torch.from_numpy(x), torch.from_numpy(m), P, dim=3)
    assert isinstance(out_t, torch.Tensor) and out_t.dtype == torch.float64
    np.testing.assert_allclose(out_t.numpy(), out3, atol=1e-12)
    # A descriptor equal to the mean stays zero instead of becoming NaN.
    assert (apply_whitening(m[None], m, P) == 0).all()
    assert (apply_whitening(torch.from_numpy(m[None]), m, P) == 0).all()


def test_pca_whitening_gives_identity_covariance():
    x, _, _ = synthetic_pairs(seed=4)
    m, P = pca_whitening(x)
    np.testing.assert_allclose(m, x.mean(axis=0), atol=1e-12)
    xc = x - m
    C = xc.T @ xc / len(x)
    np.testing.assert_allclose(P @ C @ P.T, np.eye(6), atol=1e-9)
    # Rows = principal directions (decreasing variance) scaled by 1/sqrt(variance).
    eigval, eigvec = np.linalg.eigh(C)
    np.testing.assert_allclose(np.abs(P @ eigvec[:, ::-1]), np.diag(eigval[::-1] ** -0.5),
                               atol=1e-8)
    m2, P2 = pca_whitening(torch.from_numpy(x), dim=2)
    assert isinstance(P2, torch.Tensor) and P2.shape == (2, 6)
    np.testing.assert_allclose(np.abs(P2.numpy()), np.abs(P[:2]), atol=1e-8)


def test_pca_whitening_rank_deficient_warns():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 6))  # 4 descriptors span 3 centred dimensions
    with pytest.warns(UserWarning, match='3 of 6 kept directions'):
        _, P = pca_whitening(x)
    assert np.isfinite(P).all()
    m, P = pca_whitening(x, dim=3)  # no warning needed
    xc = x - m
    np.testing.assert_allclose(P @ (xc.T @ xc / 4) @ P.T, np.eye(3), atol=1e-8)


def test_bad_whitening_inputs():
    x, qidxs, pidxs = synthetic_pairs()
    with pytest.raises(ValueError, match='qidxs has 3 entries but pidxs has 2'):
        learn_whitening(x, qidxs[:3], pidxs[:2])
    with pytest.raises(ValueError, match='pidxs holds index 300, outside the 300 rows'):
        learn_whitening(x, qidxs[:1], [300])
    with pytest.raises(ValueError, match='no query/positive pairs'):
        learn_whitening(x, [], [])
    with pytest.raises(ValueError, match=r'X must be 2-D \(N descriptors x D\)'):
        learn_whitening(x[0], [0], [1])
    with pytest.raises(ValueError, match='NaN or infinite'):
        learn_whitening(np.full_like(x, np.nan), qidxs, pidxs)
    with pytest.raises(ValueError, match=r'^dim must be None or an integer in 1 \.\. 6, got 7'):
        pca_whitening(x, dim=7)
    with pytest.raises(ValueError, match='all identical'):
        pca_whitening(np.ones((5, 3)))
    m, P = pca_whitening(x)
    with pytest.raises(ValueError, match=r'm must have shape \(5,\)'):
        apply_whitening(x[:, :5], m, P)
    with pytest.raises(ValueError, match=r'^dim must be None or an integer in 1 \.\. 6, got 0'):
        apply_whitening(x, m, P, dim=0)
