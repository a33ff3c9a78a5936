import importlib
import sys

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import knn
from irtbox.evaluation.neighbours import ExactSearcher, FaissSearcher

ranking = importlib.import_module('irtbox.evaluation.functional.ranking')
exact_module = importlib.import_module('irtbox.evaluation.neighbours.exact')
# The exact searchers, as parameters: torch's products and faiss's IndexFlatIP.
EXACT = pytest.mark.parametrize('searcher', [ExactSearcher, FaissSearcher],
                                ids=['torch', 'faiss'])


def brute_force(query, gallery, k, exclude_self=False):
    """Full similarity matrix, stable order: decreasing similarity, then lower index."""
    sims = query.astype(np.float64) @ gallery.astype(np.float64).T
    if exclude_self:
        np.fill_diagonal(sims, -np.inf)
    cols = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
    order = np.lexsort((cols, -sims), axis=1)[:, :k]
    return np.take_along_axis(sims, order, axis=1), order


def int_embeddings(n, d=4, seed=0):
    # Entries in {-1, 0, 1}: inner products are small integers, exact in
    # float32 whatever the summation order, so ties and duplicates are exact.
    return np.random.default_rng(seed).integers(-1, 2, size=(n, d)).astype(np.float32)


@pytest.mark.slow
@EXACT
@pytest.mark.parametrize('chunk_size', [1, 7, 64, 1000])
@pytest.mark.parametrize('exclude_self', [False, True])
@pytest.mark.parametrize('k', [1, 5, 23])
def test_matches_brute_force_with_ties_and_duplicates(searcher, chunk_size, exclude_self, k):
    gallery = int_embeddings(150)
    query = gallery if exclude_self else int_embeddings(40, seed=1)
    assert len(np.unique(gallery, axis=0)) < len(gallery)  # exact duplicates present
    sims, idx = knn(query, gallery, k, exclude_self=exclude_self,
                    searcher=searcher(chunk_size=chunk_size), normalize=False)
    ref_sims, ref_idx = brute_force(query, gallery, k, exclude_self)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_array_equal(sims, ref_sims)
    assert idx.dtype == np.int64 and sims.dtype == np.float32


@EXACT
@pytest.mark.parametrize('chunk_size', [3, 50, 4096])
@pytest.mark.parametrize('exclude_self', [False, True])
def test_random_floats_cosine(searcher, chunk_size, exclude_self):
    rng = np.random.default_rng(2)
    gallery = rng.standard_normal((120, 16)).astype(np.float32) * rng.uniform(0.5, 3, (120, 1))
    query = gallery if exclude_self else rng.standard_normal((30, 16)).astype(np.float32)
    k = 10
    sims, idx = knn(query, gallery, k, exclude_self=exclude_self,
                    searcher=searcher(chunk_size=chunk_size))
    qn = query / np.linalg.norm(query, axis=1, keepdims=True)
    gn = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    ref_sims, ref_idx = brute_force(qn, gn, k, exclude_self)
    # Float rounding may swap near-ties, so compare the similarity profile and
    # check each returned index really has the returned similarity.
    np.testing.assert_allclose(sims, ref_sims, atol=1e-5)
    full = qn.astype(np.float64) @ gn.astype(np.float64).T
    np.testing.assert_allclose(np.take_along_axis(full, idx, axis=1), sims, atol=1e-5)
    assert all(len(set(row)) == k for row in idx)
    if exclude_self:
        assert not (idx == np.arange(len(query))[:, None]).any()
    assert (np.diff(sims, axis=1) <= 0).all()


@EXACT
def test_identical_embeddings_exclude_self_by_index(searcher):
    # Every similarity ties: each query must get all other items in index
    # order, never itself (dropping column 0 would drop item 0 instead).
    emb = np.ones((6, 3), dtype=np.float32)
    sims, idx = knn(emb, emb, 5, exclude_self=True, searcher=searcher(chunk_size=4))
    for i in range(6):
        assert idx[i].tolist() == [j for j in range(6) if j != i]
    np.testing.assert_allclose(sims, 1.0, atol=1e-6)


@EXACT
def test_k_is_clipped_to_gallery(searcher):
    emb = int_embeddings(5)
    sims, idx = knn(emb, emb, 100, searcher=searcher(), normalize=False)
    assert idx.shape == (5, 5)
    sims, idx = knn(emb, emb, 100, exclude_self=True, searcher=searcher(), normalize=False)
    assert idx.shape == (5, 4)
    np.testing.assert_array_equal(idx, brute_force(emb, emb, 4, True)[1])


def test_tensor_in_tensor_out_numpy_in_numpy_out():
    emb = int_embeddings(20)
    sims, idx = knn(torch.from_numpy(emb), torch.from_numpy(emb), 3)
    assert isinstance(sims, torch.Tensor) and isinstance(idx, torch.Tensor)
    assert idx.dtype == torch.long
    sims_np, idx_np = knn(emb, emb, 3)
    assert isinstance(idx_np, np.ndarray)
    np.testing.assert_array_equal(idx.numpy(), idx_np)


def test_memory_is_chunked(monkeypatch):
    # The similarity block never has more than chunk_size query rows.
    rows = []
    original = exact_module.stable_topk

    def spy(sims, k):
        rows.append(sims.shape[0])
        return original(sims, k)

    monkeypatch.setattr(exact_module, 'stable_topk', spy)
    emb = int_embeddings(100)
    knn(emb, emb, 5, exclude_self=True, searcher=ExactSearcher(chunk_size=16))
    assert max(rows) == 16 and sum(rows) == 100


def test_default_chunk_keeps_the_block_small():
    assert ranking.auto_chunk_size(None, 121_000) * 121_000 * 4 <= 128 << 20
    assert ranking.auto_chunk_size(None, 10) == 4096
    with pytest.raises(ValueError, match='chunk_size must be a positive integer'):
        ranking.auto_chunk_size(0, 10)
    with pytest.raises(ValueError, match='^ExactSearcher: chunk_size must be None or a '
                                         'positive integer, got 0'):
        ExactSearcher(chunk_size=0)


def test_bad_inputs():
    emb = int_embeddings(10)
    with pytest.raises(ValueError, match='k must be a positive integer'):
        knn(emb, emb, 0)
    with pytest.raises(ValueError, match='dimension'):
        knn(emb, emb[:, :3], 2)
    with pytest.raises(ValueError, match='same items'):
        knn(emb[:5], emb, 2, exclude_self=True)
    with pytest.raises(ValueError, match="searcher type 'Annoy' is not a registered searcher"):
        knn(emb, emb, 2, searcher=dict(type='Annoy'))
    bad = emb.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match='gallery contains NaN'):
        knn(emb, bad, 2)
    with pytest.raises(ValueError, match='2-D'):
        knn(emb[0], emb, 2)
    with pytest.raises(ValueError, match='no neighbour'):
        knn(emb[:1], emb[:1], 1, exclude_self=True)


def test_missing_faiss_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, 'faiss', None)
    emb = int_embeddings(10)
    with pytest.raises(ImportError, match='faiss-cpu'):
        knn(emb, emb, 2, searcher=FaissSearcher())


def test_faiss_cuda_without_gpu_support_falls_back_to_cpu():
    faiss = pytest.importorskip('faiss')
    if hasattr(faiss, 'StandardGpuResources') and faiss.get_num_gpus() > 0:
        pytest.skip('faiss has GPU support here')
    emb = int_embeddings(30)
    with pytest.warns(UserWarning, match='searching on the CPU'):
        _, idx = knn(emb, emb, 4, searcher=FaissSearcher(device='cuda'), normalize=False)
    np.testing.assert_array_equal(idx, brute_force(emb, emb, 4)[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
@EXACT
def test_cuda_matches_brute_force(searcher):
    emb = int_embeddings(300)
    _, idx = knn(emb, emb, 9, exclude_self=True, searcher=searcher(chunk_size=64, device='cuda'),
                 normalize=False)
    np.testing.assert_array_equal(idx, brute_force(emb, emb, 9, True)[1])
