"""Diffusion re-ranking (Iscen, Tolias, Avrithis, Furon, Chum, "Efficient Diffusion on Region
Manifolds: Recovering Small Objects with Compact CNN Representations", CVPR 2017), with one
global descriptor per image and the truncation of its large-scale experiments.

Equations and defaults: docs/methods/reranking.md. Offline, from the database's k-nearest-
neighbour graph (:func:`~irtbox.evaluation.functional.neighbour_graph.neighbour_graph`, k = 50):
mutual neighbours i, j get the affinity w_ij = max(x̂_iᵀx̂_j, 0)^γ (else 0), d_i = Σ_j w_ij and
S = D^(-1/2) W D^(-1/2), kept as N x k weights (never N x N). Online, per query: its K initial
candidates are the truncated graph; y_i = max(q̂ᵀx̂_i, 0)^γ on its kq nearest (0 elsewhere); the
conjugate-gradient solution of (I - α S_KK) f = y ranks the candidates (S_KK: S restricted to
them, normalised with the whole graph's degrees, as fyang93/diffusion's truncated Laplacian).
"""
from typing import NamedTuple, Optional, Tuple

import numpy as np

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError
from ..neighbours.index import normalize as unit_rows
from .neighbour_graph import NeighbourGraph, neighbour_graph

__all__ = ['DiffusionGraph', 'diffusion_graph', 'diffusion_rerank', 'conjugate_gradient']


class DiffusionGraph(NamedTuple):
    """S = D^(-1/2) W D^(-1/2) as N x k ``ids`` and ``weights`` (0 where not mutual)."""
    ids: np.ndarray
    weights: np.ndarray


def diffusion_graph(graph: NeighbourGraph, k: int = 50, gamma: float = 3.0,
                    chunk_size: int = 4096) -> DiffusionGraph:
    """The symmetric normalised affinity of the mutual k-nearest-neighbour graph."""
    k = min(check_positive_int(k, 'k'), graph.ids.shape[1])
    ids = np.ascontiguousarray(graph.ids[:, :k])
    w = np.maximum(graph.sims[:, :k], 0).astype(np.float64) ** gamma
    for start in range(0, len(ids), chunk_size):
        rows = np.arange(start, min(len(ids), start + chunk_size))
        # j = ids[i, t] is mutual when i is among j's k: chunk x k x k, not N x N.
        mutual = (ids[ids[rows]] == rows[:, None, None]).any(axis=2)
        w[rows] *= mutual
    degree = w.sum(axis=1) + 1e-12
    weights = w / np.sqrt(degree[:, None] * degree[ids])
    return DiffusionGraph(ids, weights.astype(np.float32))


def conjugate_gradient(matvec, b: np.ndarray, tol: float = 1e-6,
                       max_iter: int = 20) -> np.ndarray:
    """x with A x = b for a symmetric positive definite A given by ``matvec``; stops when
    ‖b - A x‖ <= tol ‖b‖ (scipy's ``rtol``) or after ``max_iter`` steps; starts from 0."""
    x, r = np.zeros_like(b), b.copy()
    p, rr, goal = r.copy(), float(r @ r), (tol * np.linalg.norm(b)) ** 2
    for _ in range(max_iter):
        if rr <= goal:
            break
        ap = matvec(p)
        step = rr / float(p @ ap)
        x += step * p
        r -= step * ap
        rr, previous = float(r @ r), rr
        p = r + (rr / previous) * p
    return x


def diffusion_rerank(query, database, ids, graph: Optional[NeighbourGraph] = None,
                     k: int = 50, kq: int = 10, alpha: float = 0.99, gamma: float = 3.0,
                     tol: float = 1e-6, max_iter: int = 20) -> Tuple[np.ndarray, np.ndarray]:
    """Re-rank each query's candidates by their diffusion score f.

    Args:
        query: Q x D; database: N x D (an array that slices, e.g. a memmap).
        ids: Q x K int64 candidates, best first: the truncated graph (the paper: K = 1000).
        graph: the database's graph with at least ``k`` neighbours (``None``: computed here).
        k, kq, alpha, gamma: graph neighbours 50, query neighbours 10, α = 0.99, γ = 3.
        tol, max_iter: the conjugate-gradient stop (fyang93/diffusion: 1e-6, 20).

    Returns:
        (Q x K ids, Q x K scores f), best first; ties keep the initial order.
    """
    kq = check_positive_int(kq, 'kq')
    if not 0 <= alpha < 1:
        raise ArgumentError(f'alpha must lie in [0, 1), got {alpha!r}.', 'alpha')
    ids = np.asarray(ids, dtype=np.int64)
    if graph is None:
        graph = neighbour_graph(database, k)
    op = diffusion_graph(graph, k, gamma)
    queries = unit_rows(query).astype(np.float64)
    out_ids, out_scores = np.empty_like(ids), np.empty(ids.shape, np.float64)
    for i, (q, candidates) in enumerate(zip(queries, ids)):
        y = np.zeros(len(candidates))
        near = candidates[:kq]
        y[:len(near)] = np.maximum(unit_rows(database[near]) @ q, 0) ** gamma
        s_kk = _restricted(op, candidates)
        f = conjugate_gradient(lambda v: v - alpha * (s_kk @ v), y, tol, max_iter)
        order = np.argsort(-f, kind='stable')
        out_ids[i], out_scores[i] = candidates[order], f[order]
    return out_ids, out_scores


def _restricted(op: DiffusionGraph, candidates: np.ndarray) -> np.ndarray:
    """S restricted to the candidates: K x K dense (K is the truncation, e.g. 1000)."""
    order = np.argsort(candidates)
    ranked = candidates[order]
    neighbours = op.ids[candidates]
    at = np.minimum(np.searchsorted(ranked, neighbours), len(ranked) - 1)
    inside = ranked[at] == neighbours
    s_kk = np.zeros((len(candidates), len(candidates)))
    rows = np.broadcast_to(np.arange(len(candidates))[:, None], neighbours.shape)
    s_kk[rows[inside], order[at[inside]]] = op.weights[candidates][inside]
    return s_kk
