"""The approximate (IVF) neighbour graph of the re-rankers: equal to the exact graph when every
list is probed, to faiss's IVF-Flat search with the same centroids otherwise, high recall at
the defaults; a saved graph is refused when it is not the one asked for."""
import numpy as np
import pytest

from irtbox.evaluation.functional.neighbour_graph import (StaleGraphError, _ivf_centroids,
                                                          load_neighbour_graph, neighbour_graph,
                                                          save_neighbour_graph)
from irtbox.evaluation.functional.rerankers import rerank, rerank_graph
from irtbox.evaluation.neighbours.faiss_index import import_faiss
from irtbox.utils.errors import ArgumentError


def _clustered(n=600, d=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n // 10, d))[rng.integers(0, n // 10, n)] + 0.5 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_ivf_graph_probing_every_list_is_exact():
    db = _clustered()
    exact = neighbour_graph(db, 9, farthest=True)
    ivf = neighbour_graph(db, 9, farthest=True, method='ivf', nlist=12, nprobe=12,
                          chunk_size=50, block_rows=20)
    np.testing.assert_array_equal(ivf.ids, exact.ids)
    np.testing.assert_allclose(ivf.sims, exact.sims, atol=1e-6)
    np.testing.assert_allclose(ivf.farthest, exact.farthest, atol=1e-6)


def test_ivf_graph_equals_faiss_ivf_flat_with_the_same_centroids():
    faiss = import_faiss()
    db = _clustered()
    graph = neighbour_graph(db, 9, method='ivf', nlist=12, nprobe=3, seed=1)
    centroids = _ivf_centroids(db, 12, 1)
    quantizer = faiss.IndexFlatIP(db.shape[1])
    quantizer.add(centroids)
    index = faiss.IndexIVFFlat(quantizer, db.shape[1], 12, faiss.METRIC_INNER_PRODUCT)
    index.add(db)
    index.nprobe = 3
    sims, ids = index.search(db, 10)
    own = ids == np.arange(len(db))[:, None]
    assert own.any(1).all()  # each row finds itself first: its own list is probed
    np.testing.assert_array_equal(graph.ids, ids[~own].reshape(len(db), 9))
    np.testing.assert_allclose(graph.sims, sims[~own].reshape(len(db), 9), atol=1e-5)


def test_ivf_graph_recall_at_the_defaults():
    db = _clustered(3000, 32)
    exact, ivf = neighbour_graph(db, 20), neighbour_graph(db, 20, method='ivf')
    recall = np.mean([len(set(a) & set(b)) / 20 for a, b in zip(exact.ids, ivf.ids)])
    assert recall > 0.95


def test_rerank_with_a_full_ivf_graph_equals_the_exact_graph():
    db = _clustered()
    q = db[:4] + 0.05
    ids = np.argsort(-(q @ db.T), axis=1, kind='stable')[:, :60]
    scores = np.take_along_axis(q @ db.T, ids, 1)
    for cfg in (dict(type='kreciprocal'), dict(type='diffusion', k=10)):
        exact = rerank(cfg, q, db, ids, scores, rerank_graph(cfg, db))
        full = dict(cfg, graph=dict(method='ivf', nlist=8, nprobe=8))
        got = rerank(full, q, db, ids, scores, rerank_graph(full, db))
        np.testing.assert_array_equal(got[0], exact[0])
        np.testing.assert_allclose(got[1], exact[1], atol=1e-6)
        # Without a graph given, rerank builds the one its dict names (as a config's metric).
        rough = dict(cfg, graph=dict(method='ivf', nlist=8, nprobe=2))
        got = rerank(rough, q, db, ids, scores)
        np.testing.assert_array_equal(got[0], rerank(rough, q, db, ids, scores,
                                                     rerank_graph(rough, db))[0])
        assert (got[0] != exact[0]).any()


def test_ivf_graph_checks():
    db = _clustered(200)
    with pytest.raises(ArgumentError, match='raise nprobe'):
        neighbour_graph(db, 30, method='ivf', nlist=100, nprobe=1)
    with pytest.raises(ArgumentError, match="method must be 'exact' or 'ivf'"):
        neighbour_graph(db, 3, method='hnsw')
    with pytest.raises(ArgumentError, match='superglobal needs no graph'):
        rerank_graph(dict(type='superglobal', graph=dict(method='ivf')), db)
    with pytest.raises(ArgumentError, match="not \\['nlists'\\]"):
        rerank_graph(dict(type='diffusion', graph=dict(nlists=3)), db)


def test_saved_graph_is_refused_when_stale(tmp_path):
    db = _clustered(100)
    path = str(tmp_path / 'g.npz')
    save_neighbour_graph(path, neighbour_graph(db, 5), dict(rows='abc', k=5))
    assert load_neighbour_graph(path, dict(rows='abc', k=5)).ids.shape == (100, 5)
    with pytest.raises(StaleGraphError, match="'rows': 'abd'"):
        load_neighbour_graph(path, dict(rows='abd', k=5))
