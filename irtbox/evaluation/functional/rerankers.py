"""The one re-ranking interface: a search's candidates in, re-ranked candidates out.

A re-ranker is named by a dict, ``dict(type='kreciprocal' | 'diffusion' | 'superglobal',
shortlist=..., **its function's keyword arguments)``, as a metric's ``rerank=`` and ``irtbox
search`` name it. It chains after any search (exact, or an ``Index`` / faiss index): it takes the
query embeddings, the database rows (an array that slices: an array, a memmap, an ``Index``'s
rows), the initial ids and scores (Q x shortlist, best first), and the database's neighbour
graph when the method needs one (:func:`rerank_graph`, computed once and saveable; the dict's
``graph=dict(method='ivf', nlist=..., nprobe=...)`` makes it approximate: ``neighbour_graph``).
"""
import inspect
from typing import Optional, Tuple

import numpy as np

from irtbox.utils.errors import ArgumentError
from .diffusion import diffusion_rerank
from .k_reciprocal import k_reciprocal_rerank
from .knn import knn
from .neighbour_graph import NeighbourGraph, neighbour_graph
from .superglobal import superglobal_rerank

__all__ = ['RERANKERS', 'rerank', 'rerank_graph', 'rerank_search', 'check_rerank_cfg']

# name: (function, default shortlist = initial candidates per query, as its paper re-ranks).
RERANKERS = {
    'kreciprocal': (k_reciprocal_rerank, 100),
    'diffusion': (diffusion_rerank, 1000),
    'superglobal': (superglobal_rerank, 400),
}
_DATA = ('query', 'database', 'ids', 'scores', 'graph')


_GRAPH = ('method', 'nlist', 'nprobe', 'seed', 'chunk_size', 'block_rows')


def check_rerank_cfg(cfg: dict, name: str = 'rerank') -> Tuple[str, int, dict]:
    """(method, shortlist, the function's keyword arguments) of a re-ranker's dict."""
    if not isinstance(cfg, dict) or cfg.get('type') not in RERANKERS:
        raise ArgumentError(f'{name} must be a dict with type one of {sorted(RERANKERS)}, got '
                            f'{cfg!r}.', name)
    graph = cfg.get('graph', {})
    if graph and cfg['type'] == 'superglobal':
        raise ArgumentError(f'{name}: superglobal needs no graph, got graph={graph!r}.', name)
    unknown = sorted(set(graph) - set(_GRAPH)) if isinstance(graph, dict) else graph
    if unknown:
        raise ArgumentError(f'{name}.graph must be a dict of neighbour_graph\'s {list(_GRAPH)}, '
                            f'not {unknown!r}.', name)
    params = {key: value for key, value in cfg.items()
              if key not in ('type', 'shortlist', 'graph')}
    function, shortlist = RERANKERS[cfg['type']]
    known = set(inspect.signature(function).parameters) - set(_DATA)
    unknown = sorted(set(params) - known)
    if unknown:
        raise ArgumentError(f'{name}: {cfg["type"]} takes {sorted(known)} (and shortlist), not '
                            f'{unknown}.', name)
    shortlist = cfg.get('shortlist', shortlist)
    if isinstance(shortlist, bool) or not isinstance(shortlist, int) or shortlist < 1:
        raise ArgumentError(f'{name}.shortlist must be a positive integer, got {shortlist!r}.',
                            name)
    return cfg['type'], shortlist, params


def rerank_graph(cfg: dict, database) -> Optional[NeighbourGraph]:
    """The database's neighbour graph the re-ranker of ``cfg`` needs (``None``: none)."""
    method, _, params = check_rerank_cfg(cfg)
    if method == 'superglobal':
        return None
    k = params.get('k1', 20) if method == 'kreciprocal' else params.get('k', 50)
    return neighbour_graph(database, k, farthest=method == 'kreciprocal', **cfg.get('graph', {}))


def rerank(cfg: dict, query, database, ids, scores,
           graph: Optional[NeighbourGraph] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The candidates ``ids`` / ``scores`` (Q x K, best first) re-ranked by ``cfg``'s method,
    with ``graph`` (``None``: :func:`rerank_graph` computes the one ``cfg`` names).

    Returns (Q x K int64 ids, Q x K float64 scores), best first."""
    method, _, params = check_rerank_cfg(cfg)
    function = RERANKERS[method][0]
    graph = rerank_graph(cfg, database) if graph is None else graph
    data = dict(query=query, database=database, ids=ids, scores=scores, graph=graph)
    wanted = inspect.signature(function).parameters
    return function(**{key: value for key, value in data.items() if key in wanted}, **params)


def rerank_search(cfg: dict, query, database, searcher=None,
                  graph: Optional[NeighbourGraph] = None) -> Tuple[np.ndarray, np.ndarray]:
    """The first search (``searcher``: a searcher or its dict, exact by default; its shortlist
    of candidates per query) followed by :func:`rerank`."""
    _, shortlist, _ = check_rerank_cfg(cfg)
    query, database = np.asarray(query, np.float32), np.asarray(database, np.float32)
    scores, ids = knn(query, database, shortlist, searcher=searcher)
    return rerank(cfg, query, database, ids, scores, graph)
