import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import alpha_database_augmentation, alpha_query_expansion


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def direct_expansion(x, pool, k, alpha, exclude_self):
    """The formulas written out with the full similarity matrix (float64)."""
    x, pool = unit(x.astype(np.float64)), unit(pool.astype(np.float64))
    sims = x @ pool.T
    if exclude_self:
        np.fill_diagonal(sims, -np.inf)
    out = x.copy()
    for i in range(len(x)):
        order = np.argsort(-sims[i], kind='stable')[:k]
        for j in order:
            s = sims[i, j]
            weight = s**alpha if s > 0 else 0.0
            out[i] += weight * pool[j]
    return unit(out)


def data(seed=0, n_q=7, n_db=30, dim=5):
    rng = np.random.default_rng(seed)
    # Scaled rows: the functions normalise first.
    query = rng.normal(size=(n_q, dim)) * rng.uniform(0.5, 2, size=(n_q, 1))
    db = rng.normal(size=(n_db, dim)) * rng.uniform(0.5, 2, size=(n_db, 1))
    return query.astype(np.float32), db.astype(np.float32)


@pytest.mark.parametrize('k,alpha', [(1, 3.0), (3, 3.0), (5, 0.0), (4, 1.5), (40, 2.0)])
@pytest.mark.parametrize('chunk_size', [2, 1024])
def test_alpha_query_expansion_matches_direct_formula(k, alpha, chunk_size):
    query, db = data()
    got = alpha_query_expansion(query, db, k=k, alpha=alpha, chunk_size=chunk_size)
    assert isinstance(got, np.ndarray) and got.shape == query.shape
    np.testing.assert_allclose(got, direct_expansion(query, db, k, alpha, False), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-6)


@pytest.mark.parametrize('k,alpha', [(1, 3.0), (3, 3.0), (5, 0.0), (4, 1.5), (40, 2.0)])
@pytest.mark.parametrize('chunk_size', [3, 1024])
def test_alpha_database_augmentation_matches_direct_formula(k, alpha, chunk_size):
    _, db = data(seed=1)
    got = alpha_database_augmentation(db, k=k, alpha=alpha, chunk_size=chunk_size)
    assert got.shape == db.shape
    np.testing.assert_allclose(got, direct_expansion(db, db, k, alpha, True), atol=1e-5)


def test_known_small_case():
    # Query e1; database: e1 (s=1), (e1+e2)/sqrt2 (s=0.707), -e1 (s=-1), e2 (s=0).
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    db = np.array([[2, 0], [1, 1], [-1, 0], [0, 3]], dtype=np.float32)
    # k=3, alpha=2: the three nearest are db 0, 1 and 3 (s = 0 has weight 0).
    got = alpha_query_expansion(query, db, k=3, alpha=2)
    expected = np.array([1, 0]) + 1 * np.array([1, 0]) + 0.5 * np.array([1, 1]) / np.sqrt(2)
    np.testing.assert_allclose(got[0], expected / np.linalg.norm(expected), atol=1e-6)
    # k=0 only normalises; the negative neighbour -e1 never pulls.
    np.testing.assert_allclose(alpha_query_expansion(query * 5, db, k=0), query, atol=1e-7)
    np.testing.assert_allclose(alpha_query_expansion(query, db[2:3], k=1), query, atol=1e-7)


def test_dba_excludes_self_by_index_not_duplicates():
    db = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    got = alpha_database_augmentation(db, k=1, alpha=3)
    # Items 0 and 1 are duplicates: each is the other's neighbour (weight 1);
    # item 2 has nothing positively similar.
    np.testing.assert_allclose(got, db, atol=1e-7)
    got = alpha_database_augmentation(np.array([[0.6, 0.8], [1, 0]], dtype=np.float32), k=1,
                                      alpha=1)
    expected = np.array([[0.6 + 0.6, 0.8], [1 + 0.6 * 0.6, 0.6 * 0.8]])
    np.testing.assert_allclose(got, unit(expected), atol=1e-6)
    # A single item has no neighbours.
    np.testing.assert_allclose(alpha_database_augmentation(db[:1] * 3, k=2), db[:1])


def test_tensors_in_tensors_out():
    query, db = data(seed=2)
    got = alpha_query_expansion(torch.from_numpy(query), torch.from_numpy(db), k=2, alpha=3)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), alpha_query_expansion(query, db, k=2, alpha=3))
    got = alpha_database_augmentation(torch.from_numpy(db), k=2, alpha=3)
    assert isinstance(got, torch.Tensor)


def test_bad_reranking_arguments():
    query, db = data()
    with pytest.raises(ValueError, match='k must be a non-negative integer'):
        alpha_query_expansion(query, db, k=-1)
    with pytest.raises(ValueError, match='alpha must be a finite number >= 0'):
        alpha_database_augmentation(db, alpha=-1)
    with pytest.raises(ValueError, match='query contains NaN'):
        alpha_query_expansion(np.full_like(query, np.nan), db)
    with pytest.raises(TypeError, match='database must be a numpy array or a torch tensor'):
        alpha_query_expansion(query, db.tolist())
