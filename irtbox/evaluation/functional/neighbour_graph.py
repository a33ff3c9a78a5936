"""The database side of graph re-ranking (k-reciprocal, diffusion): every database item's nearest
neighbours among the database, computed once a block of rows at a time with the ranking core's
:func:`~irtbox.evaluation.functional.ranking.blockwise_topk` (memory chunk_size x block_rows,
never N x N; time N² D, the price of an exact graph), saved beside an index and read back
memory-mapped.

The database is any N x D array that slices (an array, an ``np.memmap``, an ``Index``'s rows);
rows are L2-normalised as they are read, so similarities are cosines.
"""
from typing import NamedTuple, Optional

import numpy as np

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write
from ..neighbours.index import normalize as unit_rows
from .ranking import blockwise_topk

__all__ = ['NeighbourGraph', 'neighbour_graph', 'save_neighbour_graph', 'load_neighbour_graph']


class NeighbourGraph(NamedTuple):
    """``ids``: N x k int64 neighbours of each item, best first, the item itself left out (by
    index; ties to the lower index); ``sims``: their N x k float32 cosines; ``farthest``: (N,)
    float32 lowest cosine of each item with the database (k-reciprocal's distance scale), or
    ``None`` when not computed."""
    ids: np.ndarray
    sims: np.ndarray
    farthest: Optional[np.ndarray] = None


def neighbour_graph(database, k: int, farthest: bool = False, chunk_size: int = 1024,
                    block_rows: int = 1 << 15) -> NeighbourGraph:
    """The exact k-nearest-neighbour graph of ``database`` (N x D) by cosine.

    Args:
        k: neighbours per item (clipped to N - 1).
        farthest: also each item's lowest cosine (a second pass of the same cost).
        chunk_size: items searched at once; block_rows: database rows read at once.
    """
    n = len(database)
    k = min(check_positive_int(k, 'k'), n - 1)
    if k < 1:
        raise ArgumentError(f'the database has {n} row(s); a neighbour graph needs at least 2.',
                            'database')
    chunk_size = check_positive_int(chunk_size, 'chunk_size')

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


def save_neighbour_graph(path: str, graph: NeighbourGraph) -> None:
    """Write ``graph`` to ``path`` (an ``.npz``, written whole or not at all)."""
    arrays = {key: value for key, value in graph._asdict().items() if value is not None}
    atomic_write(path, lambda tmp: np.savez(tmp, **arrays))


def load_neighbour_graph(path: str) -> NeighbourGraph:
    """The graph :func:`save_neighbour_graph` wrote."""
    with np.load(path) as data:
        missing = {'ids', 'sims'} - set(data.files)
        if missing:
            raise ArgumentError(f'{path} holds {sorted(data.files)}; expected a neighbour graph '
                                "with 'ids' and 'sims' (save_neighbour_graph).", 'path')
        return NeighbourGraph(data['ids'], data['sims'],
                              data['farthest'] if 'farthest' in data.files else None)
