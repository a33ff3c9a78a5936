"""k-reciprocal, diffusion and SuperGlobal re-ranking equal dense reference computations written
here from the papers (and the authors' code read for the exact definitions), on small synthetic
features: lists and scores to float tolerance."""
import numpy as np
import pytest

from irtbox.evaluation.functional.diffusion import diffusion_rerank
from irtbox.evaluation.functional.k_reciprocal import k_reciprocal_rerank
from irtbox.evaluation.functional.neighbour_graph import (load_neighbour_graph, neighbour_graph,
                                                          save_neighbour_graph)
from irtbox.evaluation.functional.rerankers import rerank, rerank_search
from irtbox.evaluation.functional.superglobal import superglobal_rerank
from irtbox.utils.errors import ArgumentError


def _data(n=60, nq=3, d=8, seed=0):
    rng = np.random.default_rng(seed)
    # Clustered, so that reciprocal sets and mutual neighbours are not empty.
    centres = rng.normal(size=(6, d))
    db = centres[rng.integers(0, 6, n)] + 0.6 * rng.normal(size=(n, d))
    q = centres[rng.integers(0, 6, nq)] + 0.6 * rng.normal(size=(nq, d))
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    return unit(q).astype(np.float32), unit(db).astype(np.float32)


def _exact_ranking(q, db):
    sims = q.astype(np.float64) @ db.T.astype(np.float64)
    return np.argsort(-sims, axis=1, kind='stable'), sims


def _zhong_reference(q, db, k1, k2, lam):
    """Zhong et al. 2017 on U = [q; db]: the dense original-distance formulation."""
    x = np.vstack([q[None], db]).astype(np.float64)
    dist = ((x[:, None] - x[None]) ** 2).sum(-1)
    dist = dist / dist.max(axis=1, keepdims=True)  # each row by its largest distance
    n = len(x)
    rank = np.argsort(dist, axis=1, kind='stable')

    def recip(i, m):
        fwd = rank[i, :m]
        return [j for j in fwd if i in rank[j, :m]]

    v = np.zeros((n, n))
    for i in range(n):
        core = recip(i, k1 + 1)
        grown = set(core)
        for c in core:
            near = recip(c, int(np.around(k1 / 2)) + 1)
            if len(set(near) & set(core)) > 2 / 3 * len(near):
                grown |= set(near)
        idx = np.array(sorted(grown))
        w = np.exp(-dist[i, idx])
        v[i, idx] = w / w.sum()
    v = np.stack([v[rank[i, :k2]].mean(0) for i in range(n)])
    jaccard = 1 - np.minimum(v[0], v).sum(1) / np.maximum(v[0], v).sum(1)
    return ((1 - lam) * jaccard + lam * dist[0])[1:]


@pytest.mark.parametrize('k1,k2,lam', [(20, 6, 0.3), (5, 3, 0.5), (7, 1, 0.0)])
def test_k_reciprocal_equals_dense_reference(k1, k2, lam):
    q, db = _data()
    ids, _ = _exact_ranking(q, db)
    got_ids, got_scores = k_reciprocal_rerank(q, db, ids, k1=k1, k2=k2, lambda_value=lam)
    for i in range(len(q)):
        ref = _zhong_reference(q[i], db, k1, k2, lam)
        np.testing.assert_allclose(-got_scores[i], ref[got_ids[i]], atol=1e-5)
        # Equal distances keep the initial order.
        np.testing.assert_array_equal(got_ids[i], ids[i][np.argsort(ref[ids[i]], kind='stable')])
    # It re-ranks: not the initial order.
    assert (got_ids != ids).any()


def test_k_reciprocal_shortlist_keeps_its_scores():
    """Re-scoring only the top 30 gives those items the full computation's distances."""
    q, db = _data()
    ids, _ = _exact_ranking(q, db)
    full_ids, full_scores = k_reciprocal_rerank(q, db, ids)
    short_ids, short_scores = k_reciprocal_rerank(q, db, ids[:, :30])
    for i in range(len(q)):
        full = dict(zip(full_ids[i], full_scores[i]))
        np.testing.assert_allclose(short_scores[i], [full[j] for j in short_ids[i]], atol=1e-9)


def _iscen_reference(q, db, candidates, k, kq, alpha, gamma):
    """Iscen et al. 2017: dense mutual-kNN affinity, S = D^-1/2 W D^-1/2, (I - αS_KK) f = y."""
    x = db.astype(np.float64)
    sims = x @ x.T
    np.fill_diagonal(sims, -np.inf)
    knn_ids = np.argsort(-sims, axis=1, kind='stable')[:, :k]
    member = np.zeros_like(sims, dtype=bool)
    member[np.arange(len(x))[:, None], knn_ids] = True
    np.fill_diagonal(sims, 1)
    w = np.where(member & member.T, np.maximum(sims, 0) ** gamma, 0)
    deg = w.sum(1) + 1e-12
    s = w / np.sqrt(np.outer(deg, deg))
    s_kk = s[np.ix_(candidates, candidates)]
    y = np.zeros(len(candidates))
    y[:kq] = np.maximum(x[candidates[:kq]] @ q.astype(np.float64), 0) ** gamma
    return np.linalg.solve(np.eye(len(candidates)) - alpha * s_kk, y)


@pytest.mark.parametrize('k,kq,alpha,gamma,shortlist', [(10, 5, 0.99, 3.0, 60),
                                                        (6, 3, 0.9, 1.0, 25)])
def test_diffusion_equals_dense_reference(k, kq, alpha, gamma, shortlist):
    q, db = _data()
    ids, _ = _exact_ranking(q, db)
    ids = ids[:, :shortlist]
    got_ids, got_scores = diffusion_rerank(q, db, ids, k=k, kq=kq, alpha=alpha, gamma=gamma,
                                           tol=1e-12, max_iter=1000)
    for i in range(len(q)):
        f = _iscen_reference(q[i], db, ids[i], k, kq, alpha, gamma)
        np.testing.assert_allclose(got_scores[i], np.sort(f)[::-1], rtol=1e-5, atol=1e-9)
        np.testing.assert_array_equal(got_ids[i], ids[i][np.argsort(-f, kind='stable')])


def _superglobal_reference(q, db, ranking, m, k, beta):
    """Shao et al. 2023, MDescAug then RerankwMDA, one query at a time."""
    top = ranking[:m]
    x = db[top].astype(np.float64)
    s = x @ x.T
    refined = np.empty_like(x)
    for b in range(m):
        near = np.argsort(-s[b], kind='stable')[:k + 1]
        w = np.r_[1.0, beta * s[b, near[1:]]]
        refined[b] = (w[:, None] * x[near]).sum(0) / w.sum()
    r = refined @ q.astype(np.float64)
    best = np.argsort(-r, kind='stable')[:k + 1]
    final = (r + refined @ refined[best].max(0)) / 2
    order = np.argsort(-final, kind='stable')
    return np.r_[top[order], ranking[m:]], final[order]


@pytest.mark.parametrize('m,k,beta', [(400, 9, 0.15), (20, 3, 0.5)])
def test_superglobal_equals_dense_reference(m, k, beta):
    q, db = _data(n=50, nq=5)
    ids, sims = _exact_ranking(q, db)
    got_ids, got_scores = superglobal_rerank(q, db, ids, np.take_along_axis(sims, ids, 1),
                                             m=m, k=k, beta=beta, chunk_size=2)
    for i in range(len(q)):
        ref_ids, ref_scores = _superglobal_reference(q[i], db, ids[i], min(m, 50), k, beta)
        np.testing.assert_array_equal(got_ids[i], ref_ids)
        np.testing.assert_allclose(got_scores[i, :len(ref_scores)], ref_scores, atol=1e-5)


def test_graph_is_exact_and_saved(tmp_path):
    _, db = _data()
    graph = neighbour_graph(db, 7, farthest=True, chunk_size=16, block_rows=10)
    sims = db.astype(np.float64) @ db.T
    np.fill_diagonal(sims, -np.inf)
    np.testing.assert_array_equal(graph.ids, np.argsort(-sims, axis=1, kind='stable')[:, :7])
    np.fill_diagonal(sims, np.inf)
    np.testing.assert_allclose(graph.farthest, sims.min(1), atol=1e-6)
    save_neighbour_graph(str(tmp_path / 'g.npz'), graph)
    loaded = load_neighbour_graph(str(tmp_path / 'g.npz'))
    np.testing.assert_array_equal(loaded.ids, graph.ids)
    np.testing.assert_array_equal(loaded.farthest, graph.farthest)


def test_one_interface_dispatches_and_checks():
    q, db = _data()
    for method in ('kreciprocal', 'diffusion', 'superglobal'):
        ids, scores = rerank_search(dict(type=method, shortlist=40), q, db)
        assert ids.shape == scores.shape == (3, 40)
        assert (np.diff(scores[:, :40], axis=1) <= 1e-12).all() or method == 'superglobal'
    ids, sims = _exact_ranking(q, db)
    got = rerank(dict(type='superglobal', m=20), q, db, ids, np.take_along_axis(sims, ids, 1))
    want = superglobal_rerank(q, db, ids, np.take_along_axis(sims, ids, 1), m=20)
    np.testing.assert_array_equal(got[0], want[0])
    with pytest.raises(ArgumentError, match='type one of'):
        rerank(dict(type='qe'), q, db, ids, sims)
    with pytest.raises(ArgumentError, match="not \\['k3'\\]"):
        rerank(dict(type='kreciprocal', k3=1), q, db, ids, sims)
