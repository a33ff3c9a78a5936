"""rerank_exactly: the best k of each query's candidates by exact inner product."""
import os
import warnings

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
    with pytest.warns(UserWarning, match='selects at most 2048 candidates'):
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
def _mapped(tmp_path, n=1000, d=16, seed=0):
    rows = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    np.save(tmp_path / 'rows.npy', rows)
    return rows, np.load(tmp_path / 'rows.npy', mmap_mode='r')


def test_reranking_in_query_blocks_bounded_by_memory_equals_one_block(tmp_path, monkeypatch):
    """Issue 47 item 8: re-ranking held nq x c x D floats at once (1000 x 2048 x 768: 6.3 GB).
    Queries are now re-ranked in blocks whose rows fit ``memory``; the result is the same."""
    from irtbox.evaluation.neighbours import index as index_module
    rows, mapped = _mapped(tmp_path)
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((37, 16)).astype(np.float32)
    candidates = rng.integers(0, len(rows), (37, 30))
    candidates[::4, -5:] = -1
    candidates[1, :] = candidates[1, 0]  # one row, repeated
    whole = rerank_exactly(mapped, queries, candidates, 6)
    read = []
    monkeypatch.setattr(index_module, 'read_rows',
                        lambda r, p: read.append(len(p)) or read_rows(r, p))
    per_query = 2 * 30 * 16 * 4
    for memory in (1, per_query, 5 * per_query):
        read.clear()
        blocked = rerank_exactly(mapped, queries, candidates, 6, memory=memory)
        np.testing.assert_array_equal(blocked[0], whole[0])
        np.testing.assert_array_equal(blocked[1], whole[1])
        queries_a_block = max(1, memory // per_query)
        assert len(read) == -(-37 // queries_a_block)
        assert max(read) <= 30 * queries_a_block
    assert rerank_exactly(mapped, queries[:0], candidates[:0], 6)[1].shape == (0, 6)


def test_rows_are_read_in_few_calls_as_row_by_row(tmp_path, monkeypatch):
    """Issue 47 item 8: one Python preadv per row. Rows are now read sorted, each once, a run
    of consecutive rows in one call; the rows are those of row-by-row reads in the order
    asked, repeats and all."""
    from irtbox.evaluation.neighbours import index as index_module
    rows, mapped = _mapped(tmp_path)
    calls = []
    preadv = os.preadv
    monkeypatch.setattr(os, 'preadv', lambda fd, buffers, at: calls.append(at) or
                        preadv(fd, buffers, at))
    run = np.arange(100, 600)
    assert (read_rows(mapped, run) == rows[run]).all() and len(calls) == 1
    rng = np.random.default_rng(2)
    scattered = np.setdiff1d(rng.integers(0, 1000, 300), np.arange(99, 601))
    scattered = scattered[np.diff(scattered, prepend=-5) > 1]  # no two consecutive
    mixed = np.concatenate([scattered, run[::-1], [999, 0, 999], scattered[:7]])
    for span, runs in ((2**30, 1), (64 * 100, 5)):  # a run cut every 100 rows
        monkeypatch.setattr(index_module, '_READ_SPAN', span)
        calls.clear()
        np.testing.assert_array_equal(read_rows(mapped, mixed), np.stack([rows[p] for p in mixed]))
        assert len(calls) == len(np.setdiff1d(scattered, [0, 999])) + runs + 2
    assert read_rows(mapped, np.zeros(0, np.int64)).shape == (0, 16)


def test_a_cut_short_file_is_an_error_naming_the_rows(tmp_path):
    rows, mapped = _mapped(tmp_path)
    # The file read is a shorter copy: the map itself stays whole (a map of a file cut short
    # is a bus error when pytest prints it).
    with open(tmp_path / 'rows.npy', 'rb') as f, open(tmp_path / 'short.npy', 'wb') as g:
        g.write(f.read(128 + 500 * 64))
    mapped.filename = str(tmp_path / 'short.npy')
    with pytest.raises(OSError, match=r'short.npy: rows \d+-999 .* past the end of the file'):
        read_rows(mapped, np.array([3, 999]))


def test_the_gpu_candidate_cap_is_said_once_and_saved(tmp_path, monkeypatch):
    """Issue 47 item 8: faiss-gpu's 2,048-candidate cap changed results without a word. Now
    the first search it cuts warns (once) and the manifest records it (simulated on the CPU
    with a cap of 50)."""
    import json
    rows = np.random.default_rng(0).standard_normal((500, 8)).astype(np.float32)
    searcher = ImageSearcher(factory='Flat', k_factor=4)
    searcher.add(rows, ids=[str(i) for i in range(500)], progress=False)
    exact = searcher.search_positions(rows[:3], 20)
    monkeypatch.setattr('irtbox.evaluation.neighbours.index.on_gpu', lambda index: True)
    monkeypatch.setattr('irtbox.evaluation.neighbours.index.FAISS_GPU_MAX_K', 50)
    with pytest.warns(UserWarning, match=r'at most 50 candidates: re-ranking 50 of the '
                                         r'k_factor x k = 80 asked \(k=20\)'):
        capped = searcher.search_positions(rows[:3], 20)
    np.testing.assert_array_equal(capped[1][:, :5], exact[1][:, :5])  # a Flat index's best
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        searcher.search_positions(rows[:3], 30)
        searcher.search_positions(rows[:3], 5)  # 20 candidates: not cut
    assert searcher.store.capped == dict(asked=80, searched=50, k=20, k_factor=4)
    searcher.save(str(tmp_path / 'index'))
    with open(tmp_path / 'index' / 'manifest.json') as f:
        assert json.load(f)['candidates_capped'] == searcher.store.capped


def test_a_loaded_index_keeps_its_rerank_graph_in_its_folder(tmp_path, monkeypatch):
    """The database graph of a re-ranker is computed once, saved in the index folder and read
    by the next load; a graph of other settings or of another index's rows is refused (computed
    again and replaced)."""
    import irtbox.search.searcher as searcher_module
    computed = []
    original = searcher_module.rerank_graph
    monkeypatch.setattr(searcher_module, 'rerank_graph',
                        lambda cfg, db: computed.append(cfg) or original(cfg, db))
    rng = np.random.default_rng(0)
    rows, queries = rng.standard_normal((80, 8)), rng.standard_normal((2, 8))
    folder, cfg = str(tmp_path / 'index'), dict(type='diffusion', k=10, shortlist=30)
    first = ImageSearcher()
    first.add(rows)
    first.save(folder)

    def search(cfg):
        return [[h.position for h in row] for row in
                ImageSearcher.load(folder).search(queries, k=5, rerank=cfg)]
    hits = search(cfg)
    assert os.path.isfile(os.path.join(folder, 'rerank-graph-diffusion.npz'))
    assert search(cfg) == hits and len(computed) == 1  # read back, not computed
    twelve = search(dict(cfg, k=12))
    assert len(computed) == 2  # other settings: computed again
    other = ImageSearcher()
    other.add(rows[::-1].copy())
    other.save(folder)  # another index in the folder: the graph there is stale
    assert search(dict(cfg, k=12)) == [[79 - p for p in row] for row in twelve]
    assert len(computed) == 3
