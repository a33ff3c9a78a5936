"""The database side of graph re-ranking (k-reciprocal, diffusion): every database item's nearest
neighbours among the database, computed once a block of rows at a time (memory chunk_size x
block_rows, never N x N) and saved beside an index. Exact, with the ranking core's
:func:`~irtbox.evaluation.functional.ranking.blockwise_topk` (time N² D: hours at 1M x 2048);
or approximate (``method='ivf'``): faiss's k-means splits the database into nlist lists, each
item searches the nprobe lists nearest to it (faiss's IVF-Flat search, the same result), time
about N² D nprobe / nlist. The lists are scanned as matrix products, a list against every item
that probes it, not item by item as faiss's IVF search does (9 times the CPU time here:
docs/benchmarks.md).

The database is any N x D array that slices (an array, an ``np.memmap``, an ``Index``'s rows);
rows are L2-normalised as they are read, so similarities are cosines.
"""
import json
from typing import NamedTuple, Optional

import numpy as np
import torch

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError, IrtboxError
from irtbox.utils.fileio import atomic_write
from ..neighbours.faiss_index import import_faiss
from ..neighbours.index import normalize as unit_rows
from ..neighbours.index import read_rows
from .ranking import blockwise_topk

__all__ = ['NeighbourGraph', 'neighbour_graph', 'save_neighbour_graph', 'load_neighbour_graph',
           'StaleGraphError']


class StaleGraphError(IrtboxError, ValueError):
    """A saved graph that is not the one asked for (another index's rows, other settings)."""


class NeighbourGraph(NamedTuple):
    """``ids``: N x k int64 neighbours of each item, best first, the item itself left out (by
    index; ties to the lower index); ``sims``: their N x k float32 cosines; ``farthest``: (N,)
    float32 lowest cosine of each item with the database (k-reciprocal's distance scale), or
    ``None`` when not computed."""
    ids: np.ndarray
    sims: np.ndarray
    farthest: Optional[np.ndarray] = None


def neighbour_graph(database, k: int, farthest: bool = False, chunk_size: int = 1024,
                    block_rows: int = 1 << 15, method: str = 'exact', nlist: Optional[int] = None,
                    nprobe: int = 16, seed: int = 0) -> NeighbourGraph:
    """The k-nearest-neighbour graph of ``database`` (N x D) by cosine.

    Args:
        k: neighbours per item (clipped to N - 1).
        farthest: also each item's lowest cosine (a second pass of the same cost; with 'ivf',
            searched in the nprobe lists farthest from the item).
        chunk_size: items searched at once; block_rows: database rows read at once.
        method: 'exact', or 'ivf' (approximate; equal to 'exact' when nprobe >= nlist).
        nlist, nprobe, seed: 'ivf''s lists (default round(√N)), lists searched per item (16)
            and k-means seed.
    """
    n = len(database)
    k = min(check_positive_int(k, 'k'), n - 1)
    if k < 1:
        raise ArgumentError(f'the database has {n} row(s); a neighbour graph needs at least 2.',
                            'database')
    chunk_size = check_positive_int(chunk_size, 'chunk_size')
    if method == 'ivf':
        return _ivf_graph(database, k, farthest, chunk_size, block_rows, nlist, nprobe, seed)
    if method != 'exact':
        raise ArgumentError(f"method must be 'exact' or 'ivf', got {method!r}.", 'method')

    def read(start, stop):
        return unit_rows(database[start:stop])

    ids, sims = np.empty((n, k), np.int64), np.empty((n, k), np.float32)
    low = np.empty(n, np.float32) if farthest else None
    for start in range(0, n, chunk_size):
        rows = slice(start, min(n, start + chunk_size))
        chunk = read(rows.start, rows.stop)
        sims[rows], ids[rows] = blockwise_topk(chunk, database, k, block_rows, read,
                                               exclude=np.arange(rows.start, rows.stop))
        if farthest:
            # The lowest cosine is the top-1 of the negated query.
            low[rows] = -blockwise_topk(-chunk, database, 1, block_rows, read)[0][:, 0]
    return NeighbourGraph(ids, sims, low)


def _ivf_centroids(database, nlist: int, seed: int) -> np.ndarray:
    """nlist unit centroids: spherical k-means (faiss) of up to 64 rows a list, evenly spaced."""
    n = len(database)
    sample = unit_rows(read_rows(database, np.unique(np.linspace(0, n - 1, min(n, 64 * nlist))
                                                     .astype(np.int64))))
    kmeans = import_faiss().Kmeans(sample.shape[1], nlist, niter=20, seed=seed, spherical=True,
                                   min_points_per_centroid=1)
    kmeans.train(sample)
    return unit_rows(kmeans.centroids)


def _ivf_graph(database, k, farthest, chunk_size, block_rows, nlist, nprobe, seed):
    n = len(database)
    nlist = min(n, check_positive_int(nlist, 'nlist') if nlist is not None else
                max(1, round(n ** 0.5)))
    nprobe = min(nlist, check_positive_int(nprobe, 'nprobe'))
    centroids = _ivf_centroids(database, nlist, seed)

    def probes(sign):  # each item's nprobe nearest centroids (farthest: of -x)
        return np.concatenate([blockwise_topk(sign * unit_rows(database[start:start + chunk_size]),
                                              centroids, nprobe)[1]
                               for start in range(0, n, chunk_size)])

    near = probes(1)
    sims, ids = _scan_lists(database, nlist, near[:, 0], near, k, 1, chunk_size, block_rows)
    if (ids < 0).any():
        raise ArgumentError(f'{int((ids < 0).any(1).sum())} item(s) found fewer than k = {k} '
                            f'neighbours in their nprobe = {nprobe} of {nlist} lists; raise '
                            'nprobe (or lower nlist).', 'nprobe')
    low = None
    if farthest:
        low = -_scan_lists(database, nlist, near[:, 0], probes(-1), 1, -1, chunk_size,
                           block_rows)[0][:, 0]
    return NeighbourGraph(ids, sims, low)


def _scan_lists(database, nlist, lists, probes, k, sign, chunk_size, block_rows):
    """Each item's top k (of sign x cosine, itself left out) among the items of the lists it
    probes: list by list, a block of the list's rows against a chunk of the items probing it."""
    n = len(database)
    best = torch.full((n, k), float('-inf')), torch.full((n, k), -1, dtype=torch.long)
    members = np.argsort(lists, kind='stable')
    member_at = np.searchsorted(lists[members], np.arange(nlist + 1))
    flat = probes.reshape(-1)
    probers = np.argsort(flat, kind='stable')
    prober_at = np.searchsorted(flat[probers], np.arange(nlist + 1))
    probers //= probes.shape[1]
    for c in range(nlist):
        items, queries = members[member_at[c]:member_at[c + 1]], \
            probers[prober_at[c]:prober_at[c + 1]]
        for lo in range(0, len(items), block_rows):
            block = items[lo:lo + block_rows]
            rows = torch.from_numpy(unit_rows(read_rows(database, block))).T
            for start in range(0, len(queries), chunk_size):
                q = queries[start:start + chunk_size]
                sims = sign * torch.from_numpy(unit_rows(read_rows(database, q))) @ rows
                at = np.minimum(np.searchsorted(block, q), len(block) - 1)
                own = np.flatnonzero(block[at] == q)  # the items of this block themselves
                sims[own, at[own]] = float('-inf')
                # Only the items this block improves are merged (a top-k is the costly part).
                better = (sims > best[0][q, -1:]).any(1).nonzero()[:, 0]
                q, sims = torch.from_numpy(q)[better], sims[better]
                top, at = torch.topk(torch.cat([best[0][q], sims], 1), k, dim=1)
                best[0][q] = top
                best[1][q] = torch.gather(torch.cat([best[1][q], torch.from_numpy(block)
                                                     .expand(len(q), -1)], 1), 1, at)
    sims, ids = best[0].numpy(), best[1].numpy()
    ids[np.isinf(sims)] = -1
    return sims, ids


def save_neighbour_graph(path: str, graph: NeighbourGraph, meta: Optional[dict] = None) -> None:
    """Write ``graph`` to ``path`` (an ``.npz``, written whole or not at all) with ``meta``
    (JSON data, e.g. the index's fingerprint and the graph's settings) that
    :func:`load_neighbour_graph` checks."""
    arrays = {key: value for key, value in graph._asdict().items() if value is not None}
    arrays['meta'] = np.array(json.dumps(meta, sort_keys=True))
    atomic_write(path, lambda tmp: np.savez(tmp, **arrays))


def load_neighbour_graph(path: str, meta: Optional[dict] = None) -> NeighbourGraph:
    """The graph :func:`save_neighbour_graph` wrote; with ``meta``, a
    :class:`StaleGraphError` unless it was saved with the same."""
    with np.load(path) as data:
        missing = {'ids', 'sims'} - set(data.files)
        if missing:
            raise ArgumentError(f'{path} holds {sorted(data.files)}; expected a neighbour graph '
                                "with 'ids' and 'sims' (save_neighbour_graph).", 'path')
        saved = json.loads(str(data['meta'])) if 'meta' in data.files else None
        if meta is not None and saved != json.loads(json.dumps(meta)):
            raise StaleGraphError(f'{path} is the graph of {saved}, not of {meta}: compute it '
                                  'again.')
        return NeighbourGraph(data['ids'], data['sims'],
                              data['farthest'] if 'farthest' in data.files else None)
