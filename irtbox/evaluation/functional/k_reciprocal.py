"""k-reciprocal re-ranking (Zhong, Zheng, Cao, Li, "Re-ranking Person Re-identification with
k-reciprocal Encoding", CVPR 2017), each query alone against the database.

Equations and defaults: docs/methods/reranking.md. In short, on the set U = {q} ∪ database,
with d(a, b) = ‖â - b̂‖² = 2 - 2 âᵀb̂ of unit rows and each row's distances divided by its
largest, d̃(a, ·) = d(a, ·) / max_u d(a, u):

- N(a, n): the n nearest of a in U, a itself first (ties to the lower index, q lowest);
- R(a, n) = {b ∈ N(a, n) : a ∈ N(b, n)}, the k-reciprocal set; R*(a) = R(a, k1 + 1) grown by
  every R(c, round(k1 / 2) + 1), c ∈ R(a, k1 + 1), that shares more than 2/3 of its items with it;
- V_a[b] = exp(-d̃(a, b)) / Σ_{b' ∈ R*(a)} exp(-d̃(a, b')) on R*(a), 0 elsewhere; then the
  local query expansion V_a ← mean of V_b over b ∈ N(a, k2);
- d*(q, x) = (1 - λ) (1 - Σ min(V_q, V_x) / Σ max(V_q, V_x)) + λ d̃(q, x).

Only the query's initial candidates are re-scored (the rest of the database keeps its order
after them). Every set above lies within a few hops of them in the database's k1-nearest-neighbour
graph (:func:`~irtbox.evaluation.functional.neighbour_graph.neighbour_graph` with ``farthest``:
computed once), with the query inserted where it ranks; the query's own scale needs its lowest
cosine with the database (one pass of the ranking core). Memory: the graph (N x k1) and, per
query, the few thousand items near its candidates; no N x N or Q x N matrix is kept.
"""
from typing import Optional, Tuple

import numpy as np

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError
from ..neighbours.index import normalize as unit_rows
from .neighbour_graph import NeighbourGraph, neighbour_graph
from .ranking import blockwise_topk

__all__ = ['k_reciprocal_rerank']


def k_reciprocal_rerank(query, database, ids, graph: Optional[NeighbourGraph] = None,
                        k1: int = 20, k2: int = 6, lambda_value: float = 0.3,
                        block_rows: int = 1 << 15) -> Tuple[np.ndarray, np.ndarray]:
    """Re-rank each query's candidates by the k-reciprocal distance d*.

    Args:
        query: Q x D; database: N x D (an array that slices, e.g. a memmap).
        ids: Q x K int64 candidates of each query, best first (an exact search, or a faiss
            index's: they stand for the query's own neighbour list); K >= k1.
        graph: the database's graph with at least k1 neighbours and ``farthest``
            (``None``: computed here).
        k1, k2, lambda_value: the paper's k1 = 20, k2 = 6, λ = 0.3.

    Returns:
        (Q x K ids, Q x K scores = -d*), best first; ties keep the initial order.
    """
    k1, k2 = check_positive_int(k1, 'k1'), check_positive_int(k2, 'k2')
    if not 0 <= lambda_value <= 1:
        raise ArgumentError(f'lambda_value must lie in [0, 1], got {lambda_value!r}.',
                            'lambda_value')
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 2 or ids.shape[1] < min(k1, len(database)):
        raise ArgumentError(f'ids has shape {ids.shape}; expected Q x K candidates with K >= '
                            f'k1 = {k1}.', 'ids')
    if graph is None:
        graph = neighbour_graph(database, k1, farthest=True, block_rows=block_rows)
    if graph.farthest is None or graph.ids.shape[1] < min(k1, len(database) - 1):
        raise ArgumentError(f'graph has {graph.ids.shape[1]} neighbours per item and farthest '
                            f'{"missing" if graph.farthest is None else "set"}; expected at '
                            f'least k1 = {k1} and farthest (neighbour_graph(farthest=True)).',
                            'graph')
    queries = unit_rows(query)
    lowest = -blockwise_topk(-queries, database, 1, block_rows,
                             lambda a, b: unit_rows(database[a:b]))[0][:, 0]
    out_ids, out_scores = np.empty_like(ids), np.empty(ids.shape, np.float64)
    for i, (q, candidates) in enumerate(zip(queries, ids)):
        dist = _QueryUniverse(q, float(lowest[i]), database, graph, candidates, k1, k2,
                              lambda_value).distances()
        order = np.argsort(dist, kind='stable')
        out_ids[i], out_scores[i] = candidates[order], -dist[order]
    return out_ids, out_scores


class _QueryUniverse:
    """U = {q} ∪ database for one query; q is key -1, database item j is key j."""

    def __init__(self, q, lowest, database, graph, candidates, k1, k2, lambda_value):
        self.q, self.database, self.graph = q.astype(np.float64), database, graph
        self.candidates, self.k1, self.k2, self.lam = candidates, k1, k2, lambda_value
        self.scale_q = 2 - 2 * lowest  # max_u d(q, u): d(q, q) = 0 is never the largest
        self.rows, self.sims, self.lists, self.v = {}, {}, {}, {}

    def row(self, a):
        if a < 0:
            return self.q
        if a not in self.rows:
            self.rows[a] = unit_rows(self.database[a:a + 1])[0].astype(np.float64)
        return self.rows[a]

    def sim(self, a, b):
        key = (a, b) if a <= b else (b, a)
        if key not in self.sims:
            self.sims[key] = float(self.row(a) @ self.row(b))
        return self.sims[key]

    def scale(self, a):
        if a < 0:
            return self.scale_q
        return max(2 - 2 * float(self.graph.farthest[a]), 2 - 2 * self.sim(-1, a))

    def nearest(self, a, n):
        """N(a, n) as a tuple of keys."""
        if (a, n) not in self.lists:
            if a < 0:
                found = (-1, *self.candidates[:n - 1].tolist())
            else:
                row = self.graph.ids[a, :n - 1].tolist()
                # q precedes the items of equal cosine (it is U's first item).
                at = int(np.count_nonzero(self.graph.sims[a, :n - 1] > self.sim(-1, a)))
                found = (a, *(row[:at] + [-1] + row[at:])[:n - 1])
            self.lists[a, n] = found
        return self.lists[a, n]

    def reciprocal(self, a, n):
        return [b for b in self.nearest(a, n) if a in self.nearest(b, n)]

    def encoding(self, a):
        """V_a before the local query expansion, as {key: weight}."""
        if a not in self.v:
            core = self.reciprocal(a, self.k1 + 1)
            grown, half = set(core), int(np.around(self.k1 / 2)) + 1
            for c in core:
                near = self.reciprocal(c, half)
                if len(set(near) & set(core)) > 2 / 3 * len(near):
                    grown.update(near)
            keys = sorted(grown)
            weights = np.exp([-(2 - 2 * self.sim(a, b)) / self.scale(a) for b in keys])
            self.v[a] = dict(zip(keys, weights / weights.sum()))
        return self.v[a]

    def expanded(self, a):
        """V_a after the local query expansion over N(a, k2)."""
        total, near = {}, self.nearest(a, self.k2)
        for b in near:
            for key, w in self.encoding(b).items():
                total[key] = total.get(key, 0.0) + w
        return {key: w / len(near) for key, w in total.items()}

    def distances(self):
        v_q = self.expanded(-1)
        out = np.empty(len(self.candidates))
        for t, j in enumerate(self.candidates.tolist()):
            v_j = self.expanded(j)
            shared = sum(min(w, v_j.get(key, 0.0)) for key, w in v_q.items())
            jaccard = 1 - shared / (2 - shared)
            out[t] = (1 - self.lam) * jaccard + self.lam * (2 - 2 * self.sim(-1, j)) / self.scale_q
        return out
