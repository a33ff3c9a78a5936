"""The ranking core and the metrics of its searches against brute force: full similarity
matrices sorted stably in numpy."""
import importlib

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import retrieval_metrics
from irtbox.evaluation.functional.ranking import rank_of, stable_ranks, stable_topk
from irtbox.evaluation.neighbours import ExactSearcher, FaissSearcher


def int_embeddings(n, d=4, seed=0):
    # Entries in {-1, 0, 1}: inner products are exact small integers, so ties are exact.
    return np.random.default_rng(seed).integers(-1, 2, size=(n, d)).astype(np.float32)


def stable_rank_matrix(sims):
    """rank[i, j] = position of item j in row i's order (decreasing, lower index first)."""
    cols = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
    order = np.lexsort((cols, -sims), axis=1)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(sims.shape[1])[None], axis=1)
    return ranks


def brute_force_metrics(q, q_labels, g, g_labels, ks, leave_one_out):
    sims = q.astype(np.float64) @ g.astype(np.float64).T
    if leave_one_out:
        np.fill_diagonal(sims, -np.inf)
    ranks = stable_rank_matrix(sims)
    relevant = q_labels[:, None] == g_labels[None]
    if leave_one_out:
        np.fill_diagonal(relevant, False)
    first = np.where(relevant.any(1), np.where(relevant, ranks, ranks.size).min(1), np.inf)
    out = {f'recall@{k}': float(np.mean(first < k)) for k in ks}
    aps, rps, p1s = [], [], []
    for i in np.flatnonzero(relevant.sum(1) > 0):
        r = relevant[i].sum()
        pos = np.sort(ranks[i][relevant[i]])  # 0-based positions of the positives
        top = pos[pos < r]
        aps.append(np.sum(np.arange(1, len(top) + 1) / (top + 1)) / r)
        rps.append(len(top) / r)
        p1s.append(float(pos[0] == 0))
    out.update({'map@r': np.mean(aps), 'r_precision': np.mean(rps), 'precision@1': np.mean(p1s)})
    return out


@pytest.mark.slow
@pytest.mark.parametrize('searcher', [ExactSearcher, FaissSearcher], ids=['torch', 'faiss'])
@pytest.mark.parametrize('chunk_size', [1, 13, None])
@pytest.mark.parametrize('leave_one_out', [True, False])
@pytest.mark.parametrize('skewed', [True, False])
def test_retrieval_metrics_equal_a_full_stable_sort(searcher, chunk_size, leave_one_out, skewed,
                                                    monkeypatch):
    # Missed rows counted 3 at a time, so that the grouping is exercised.
    monkeypatch.setattr(importlib.import_module('irtbox.evaluation.functional.retrieval'),
                        '_COUNT_ROWS', 3)
    # Few distinct vectors and many exact ties, so that ties straddle every cut; classes
    # of very different sizes, or many small ones unrelated to the vectors, so that many
    # first hits fall far below the top max R and are counted.
    emb = int_embeddings(160, d=3)
    rng = np.random.default_rng(1)
    labels = rng.choice(12, size=160, p=np.r_[0.45, [0.05] * 11]) if skewed \
        else rng.integers(0, 40, size=160)
    ks = (1, 2, 5, 17, 40, 159, 1000)
    searcher = searcher(chunk_size=chunk_size)
    if leave_one_out:
        got = retrieval_metrics(emb, labels, ks=ks, searcher=searcher, normalize=False)
        want = brute_force_metrics(emb, labels, emb, labels, ks, True)
    else:
        got = retrieval_metrics(emb[:50], labels[:50], emb[50:], labels[50:], ks=ks,
                                searcher=searcher, normalize=False)
        want = brute_force_metrics(emb[:50], labels[:50], emb[50:], labels[50:], ks, False)
    assert got == pytest.approx(want, abs=1e-12)


def test_recall_only_counts_beyond_a_small_top():
    emb = int_embeddings(200, d=3, seed=3)
    labels = np.random.default_rng(2).integers(0, 4, size=200)
    ks = (1, 3, 60, 150)
    got = retrieval_metrics(emb, labels, ks=ks, map_at_r=False, normalize=False,
                            searcher=ExactSearcher(chunk_size=7))
    want = brute_force_metrics(emb, labels, emb, labels, ks, True)
    assert got == pytest.approx({k: v for k, v in want.items() if k.startswith('recall')})


def test_rank_of_counts_ties_by_index():
    sims = torch.tensor([[0.5, 0.9, 0.5, 0.2, 0.5], [1.0, 1.0, 1.0, 0.0, 1.0],
                         [0.1, 0.3, 0.2, 0.0, 0.4]])
    # Row 0: the item at column 2 (0.5): above it 0.9 and the tied column 0 -> rank 2.
    # Row 1: column 4 (1.0), after columns 0, 1, 2 tied with it -> rank 3.
    # Row 2: column 2 (0.2), no tie: 0.3 and 0.4 above -> rank 2.
    value = torch.tensor([0.5, 1.0, 0.2])
    assert rank_of(sims, value, torch.tensor([2, 4, 2])).tolist() == [2, 3, 2]
    assert rank_of(sims, value, torch.tensor([0, 0, 2])).tolist() == [1, 0, 2]


@pytest.mark.slow
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('levels', [0, 2, 40, 1000])
def test_stable_topk_equals_a_stable_sort(dtype, levels):
    """Long and short rows, with ties at the k-th value (straddling the cut), whole rows
    of one value, and -inf entries."""
    gen = torch.Generator().manual_seed(levels)
    for trial in range(12):
        rows = int(torch.randint(1, 20, (1, ), generator=gen))
        n = int(torch.randint(1, 20000, (1, ), generator=gen))
        k = int(torch.randint(1, min(n, 40) + 1, (1, ), generator=gen))
        sims = torch.randn(rows, n, generator=gen, dtype=dtype)
        if levels:
            sims = (sims * levels).round() / levels
        if trial % 4 == 0:
            sims[:, torch.randint(0, n, (5, ), generator=gen)] = float('-inf')
        if trial == 5:
            sims[:] = 0.5
        values, columns = stable_topk(sims, k)
        want = torch.sort(sims, dim=1, descending=True, stable=True).indices[:, :k]
        assert torch.equal(columns, want)
        assert torch.equal(values, sims.gather(1, want))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_stable_ranks_equal_a_stable_argsort(dtype):
    rng = np.random.default_rng(0)
    for trial in range(30):
        # Coarse values: many ties, between items and with other database entries.
        scores = (rng.integers(0, 12, size=300) / 7).astype(dtype)
        items = rng.choice(300, size=rng.integers(1, 40), replace=False)
        order = np.argsort(-scores, kind='stable')
        position = np.empty(300, dtype=np.int64)
        position[order] = np.arange(300)
        np.testing.assert_array_equal(stable_ranks(scores, items), position[items])
    assert len(stable_ranks(scores, np.zeros(0, dtype=np.int64))) == 0


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_non_finite_input_is_named(bad, dtype):
    from irtbox.evaluation.functional import knn
    emb = np.ones((6, 3), dtype=dtype)
    emb[4, 2] = bad
    with pytest.raises(ValueError, match='^gallery contains NaN or infinite'):
        knn(np.ones((2, 3), dtype=dtype), emb, 2)
    with pytest.raises(ValueError, match='^query_emb contains NaN'):
        retrieval_metrics(emb, np.zeros(6))


def test_blockwise_topk_equals_stable_topk_of_the_whole_gallery_ties_included():
    """The gallery read in blocks (a memory map's way) gives stable_topk's top k of the whole
    matrix, ties to the lower row across blocks; a query's own row can be left out."""
    from irtbox.evaluation.functional.ranking import blockwise_topk
    rng = np.random.default_rng(0)
    rows = rng.integers(-2, 3, size=(300, 6)).astype(np.float32)  # many exact ties
    queries = rows[::7]
    scores, found = blockwise_topk(queries, rows, 9, block_rows=32)
    want_s, want_i = stable_topk(torch.from_numpy(queries) @ torch.from_numpy(rows).T, 9)
    np.testing.assert_array_equal(found, want_i.numpy())
    np.testing.assert_array_equal(scores, want_s.numpy())
    own = np.arange(0, 300, 7)
    _, held_out = blockwise_topk(queries, rows, 9, block_rows=50, exclude=own)
    sims = torch.from_numpy(queries) @ torch.from_numpy(rows).T
    sims[torch.arange(len(own)), torch.from_numpy(own)] = float('-inf')
    np.testing.assert_array_equal(held_out, stable_topk(sims, 9)[1].numpy())
