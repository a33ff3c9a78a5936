"""rerank_exactly: the best k of each query's candidates by exact inner product."""
import numpy as np
import pytest

from irtbox.search import ImageSearcher
from irtbox.search.searcher import read_rows, rerank_exactly


def test_a_hand_computed_case():
    rows = np.array([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6]], np.float32)
    queries = np.array([[1, 0], [0, 1]], np.float32)
    # Query 0 scores rows 1, 2, 3 as 0, 0.6, 0.8; query 1 has two candidates and a -1.
    candidates = np.array([[1, 2, 3], [0, -1, 2]])
    scores, positions = rerank_exactly(rows, queries, candidates, 2)
    np.testing.assert_array_equal(positions, [[3, 2], [2, 0]])
    np.testing.assert_allclose(scores, [[0.8, 0.6], [0.8, 0.0]], atol=1e-7)
    scores, positions = rerank_exactly(rows, queries, candidates, 3)
    assert positions[1].tolist() == [2, 0, -1] and scores[1, 2] == -np.inf


def test_a_memory_map_gives_what_an_array_gives(tmp_path):
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((500, 8)).astype(np.float32)
    np.save(tmp_path / 'rows.npy', rows)
    mapped = np.load(tmp_path / 'rows.npy', mmap_mode='r')
    queries = rng.standard_normal((7, 8)).astype(np.float32)
    candidates = rng.integers(0, 500, (7, 20))
    a, b = rerank_exactly(rows, queries, candidates, 5), rerank_exactly(mapped, queries,
                                                                       candidates, 5)
    np.testing.assert_array_equal(a[1], b[1])
    expected = [c[np.argsort(-(rows[c] @ q), kind='stable')[:5]]
                for q, c in zip(queries, candidates)]
    np.testing.assert_array_equal(a[1], expected)


def test_k_factor_must_be_a_positive_integer():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match='k_factor must be a positive integer'):
            ImageSearcher(k_factor=bad)


def test_rows_of_a_mapped_file_are_read_not_mapped(tmp_path):
    """Re-ranking reads a memory-mapped file's rows with pread: the pages a map would fault
    in around each row (the whole file, for rows spread over it) do not join the process's
    resident memory (RssFile, Linux)."""
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((100_000, 128)).astype(np.float32)  # 51 MB
    np.save(tmp_path / 'rows.npy', rows)
    mapped = np.load(tmp_path / 'rows.npy', mmap_mode='r')
    positions = np.unique(rng.integers(0, len(rows), 4000))

    def file_pages_mb():
        with open('/proc/self/status') as f:
            return int(f.read().split('RssFile:')[1].split()[0]) / 1024
    before = file_pages_mb()
    np.testing.assert_array_equal(read_rows(mapped, positions), rows[positions])
    assert file_pages_mb() - before < 5


def test_an_index_on_a_gpu_is_asked_for_at_most_what_faiss_gpu_selects(monkeypatch):
    """faiss-gpu selects at most 2048 neighbours: k x k_factor candidates are cut to that
    (never below k, which the index itself refuses past 2048), simulated on the CPU."""
    from irtbox.evaluation.neighbours.faiss_index import FAISS_GPU_MAX_K
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((3000, 8)).astype(np.float32)
    searcher = ImageSearcher(factory='Flat', k_factor=4, identity=dict(embedding_dim=8))
    searcher.add(rows, ids=[str(i) for i in range(3000)], progress=False)
    asked = []
    search = searcher.faiss_index.search
    monkeypatch.setattr(searcher.faiss_index, 'search',
                        lambda q, k: asked.append(k) or search(q, k))
    monkeypatch.setattr('irtbox.evaluation.neighbours.index.on_gpu', lambda index: True)
    searcher.search_positions(rows[:2], 600)
    searcher.search_positions(rows[:2], 10)
    assert asked == [FAISS_GPU_MAX_K, 40]


def test_search_with_a_reranker_is_the_reranked_shortlist():
    """ImageSearcher.search(rerank=...): the index's shortlist re-ranked, as the functions do it
    on the same rows; the graph is computed once and dropped when rows are added."""
    from irtbox.cli.search import RERANK_METHODS
    from irtbox.evaluation.functional import RERANKERS, rerank_search
    assert RERANK_METHODS == tuple(sorted(RERANKERS))
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((80, 8)).astype(np.float32)
    queries = rng.standard_normal((2, 8)).astype(np.float32)
    searcher = ImageSearcher()
    searcher.add(rows)
    for method in RERANK_METHODS:
        cfg = dict(type=method, shortlist=30)
        hits = searcher.search(queries, k=5, rerank=cfg)
        ids, scores = rerank_search(cfg, queries, searcher.embeddings)
        assert [[h.position for h in row] for row in hits] == ids[:, :5].tolist()
        np.testing.assert_allclose([[h.score for h in row] for row in hits], scores[:, :5],
                                   rtol=1e-6)
    assert sum(g is not None for g in searcher._rerank_graphs.values()) == 2
    searcher.add(rows[:3])
    assert not searcher._rerank_graphs
