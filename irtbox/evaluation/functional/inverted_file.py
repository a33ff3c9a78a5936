"""An inverted file searched with matrix products: approximate search for large galleries.

The gallery is split into ``nlist`` cells by spherical k-means, each item in the cell of
its nearest centroid (by inner product). A query's candidates are the items of the
``nprobe`` cells whose centroids are nearest to it (with a ``candidates`` budget, of the
nearest ones until they hold that many items); they are ranked by their similarity.
faiss's ``IndexIVFFlat`` computes the same candidates but scans each list query by query,
about ten times slower per candidate than a matrix product on a CPU. Here the queries of a
chunk that probe a cell are multiplied with the cell's items in one matrix product, so a
candidate costs about what it costs in exact search, and probing a tenth of the gallery
takes little more than a tenth of its time (docs/benchmarks.md).

Conventions are those of the exact search (:mod:`.search`): rows are queries, equal
similarities go to the lower gallery index, leave-one-out by index. With
``nprobe == nlist`` every query sees the whole gallery and the results are exact.
"""
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from .search import auto_chunk_size, similarity_blocks, stable_order

__all__ = ['parse_ivf', 'spherical_kmeans', 'InvertedFile', 'CandidateBlock']

# k-means is trained on at most this many gallery items per centroid (as faiss, which
# samples 256 per centroid by default; fewer suffice for a partition used to probe).
_TRAIN_PER_CENTROID = 16
_KMEANS_ITERATIONS = 6
# The candidate block of the default chunk size stays under about this many bytes.
_BLOCK_BYTES = 128 << 20
_MAX_AUTO_CHUNK = 8192


def parse_ivf(index: str, owner: str) -> int:
    """``nlist`` of an ``'IVF<nlist>'`` (or ``'IVF<nlist>,Flat'``) index string."""
    match = re.fullmatch(r'IVF(\d+)(,Flat)?', str(index))
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"{owner}: backend='torch' searches exactly (index=None) or with "
                         f"its own inverted file, index='IVF<nlist>' (e.g. 'IVF512'); "
                         f"index={index!r} needs backend='faiss' (any faiss factory string "
                         'does).')
    return int(match.group(1))


def spherical_kmeans(x: torch.Tensor,
                     k: int,
                     iterations: int = _KMEANS_ITERATIONS,
                     per_centroid: int = _TRAIN_PER_CENTROID,
                     seed: int = 0) -> torch.Tensor:
    """``k`` unit-norm centroids of the rows of ``x`` (N x D), by inner product.

    Lloyd's iterations on a seeded sample of at most ``k * per_centroid`` rows: each row
    goes to the centroid of largest inner product, each centroid becomes the normalised
    sum of its rows (a centroid left empty keeps its place). Deterministic for a seed.

    Returns:
        k x D tensor on ``x``'s device and dtype.
    """
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f'inverted file: nlist must be between 1 and the gallery size '
                         f'{n}, got {k}.')
    generator = torch.Generator().manual_seed(seed)
    pick = torch.randperm(n, generator=generator)[:min(n, k * per_centroid)]
    sample = x[pick.to(x.device)]
    centroids = F.normalize(sample[:k], dim=1)
    chunk = auto_chunk_size(None, k, 'inverted file')
    for _ in range(iterations):
        nearest = torch.cat([sims.argmax(dim=1)
                             for _, sims in similarity_blocks(sample, centroids, chunk)])
        sums = torch.zeros_like(centroids).index_add_(0, nearest, sample)
        filled = torch.bincount(nearest, minlength=k) > 0
        centroids = torch.where(filled[:, None], F.normalize(sums, dim=1), centroids)
    return centroids


class CandidateBlock:
    """The candidates of a chunk of queries and their similarities.

    Row r holds the items of query ``start + r``'s probed cells, cell after cell in
    probe order, each cell's items by increasing gallery index; ``sims`` is -inf past the
    row's last candidate and at the query itself (leave-one-out). A block lives in a
    buffer reused by the next one.

    Attributes:
        start: the first query's index.
        sims: rows x width float similarities.
    """

    def __init__(self, start: int, sims: torch.Tensor, probes: torch.Tensor,
                 starts: torch.Tensor, ends: torch.Tensor, index: 'InvertedFile') -> None:
        self.start = start
        self.sims = sims
        # Per row and probe slot: the cell, and the columns its items take.
        self._probes = probes
        self._starts = starts
        self._ends = ends
        self._index = index

    def ids(self, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """Gallery indices of ``columns`` (rows' x c) of ``rows``; -1 past a row's end."""
        ends = self._ends[rows]
        slot = torch.searchsorted(ends, columns, right=True)
        valid = slot < ends.shape[1]
        slot = slot.clamp(max=ends.shape[1] - 1)
        cell = self._probes[rows].gather(1, slot).clamp(min=0)
        place = self._index.offsets[cell] + columns - self._starts[rows].gather(1, slot)
        ids = self._index.order[place.clamp(max=len(self._index.order) - 1)]
        return torch.where(valid, ids, torch.full_like(ids, -1))

    def columns(self, rows: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Columns of gallery ``items`` (rows' x t, -1 = none) in ``rows``; -1 where an
        item is not among the row's candidates."""
        cell = self._index.cell_of[items.clamp(min=0)]
        match = self._probes[rows][:, None, :] == cell[:, :, None]
        found = match.any(dim=2) & (items >= 0)
        slot = match.int().argmax(dim=2)
        columns = self._starts[rows].gather(1, slot) + self._index.position[items.clamp(min=0)]
        return torch.where(found, columns, torch.full_like(columns, -1))

    def topk(self, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each row's ``k`` best candidates by decreasing similarity, equal ones by
        increasing gallery index; missing ones (fewer than k candidates) are -inf / -1.

        Returns:
            (similarities, gallery indices), each rows x k.
        """
        rows, width = self.sims.shape
        take = min(k + 1, width)
        vals, cols = torch.topk(self.sims, take, dim=1)
        everyone = torch.arange(rows, device=self.sims.device)
        ids = self.ids(everyone, cols)
        if take > k:
            # Equal similarities across the cut: the lowest gallery indices make it.
            straddle = ((vals[:, k - 1] == vals[:, k]) & torch.isfinite(vals[:, k])).nonzero()
            for row in straddle.squeeze(1).tolist():
                vals[row, :k], ids[row, :k] = self._row_topk(row, k)
            vals, ids = vals[:, :k], ids[:, :k]
        return _ordered(vals, ids, k)

    def _row_topk(self, row: int, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """The top ``k`` of one row, ties by gallery index (rows whose ties straddle the
        cut; rare)."""
        sims = self.sims[row]
        ids = self.row_ids(torch.tensor([row], device=sims.device))[0]
        # Order by (similarity desc, gallery index asc) on this one row.
        ids_sorted, perm = ids.sort()
        vals, order = sims[perm].sort(descending=True, stable=True)
        return vals[:k], ids_sorted[order][:k]

    def row_ids(self, rows: torch.Tensor) -> torch.Tensor:
        """Gallery indices of every column of ``rows`` (rows' x width; -1 past the end)."""
        width = self.sims.shape[1]
        columns = torch.arange(width, device=self.sims.device).expand(len(rows), width)
        return self.ids(rows, columns.contiguous())


class InvertedFile:
    """A gallery partitioned into cells by nearest centroid, searched cell by cell.

    Args:
        gallery: N x D float tensor (normalised rows for cosine similarity).
        centroids: nlist x D tensor (e.g. :func:`spherical_kmeans` of the gallery).
        keep_nearest: also keep each gallery item's this many cells of nearest centroid
            (sorted): a leave-one-out search, whose queries are the gallery, then probes
            from them instead of comparing every query with the centroids again.
    """

    def __init__(self, gallery: torch.Tensor, centroids: torch.Tensor,
                 keep_nearest: int = 0) -> None:
        self.centroids = centroids.to(gallery.device, gallery.dtype)
        self.nlist = centroids.shape[0]
        chunk = auto_chunk_size(None, self.nlist, 'inverted file')
        nearest = [_nearest(sims, max(1, min(keep_nearest, self.nlist)))
                   for _, sims in similarity_blocks(gallery, self.centroids, chunk)]
        # Cell numbers in the narrowest integer type: this list is N x keep_nearest.
        narrow = torch.int16 if self.nlist <= torch.iinfo(torch.int16).max else torch.int32
        self.nearest = torch.cat(nearest).to(narrow) if keep_nearest else None
        cell = torch.cat([n[:, 0] for n in nearest])
        # Items by cell, by increasing index within a cell (a stable sort).
        self.order = torch.argsort(cell, stable=True)
        self.sizes = torch.bincount(cell, minlength=self.nlist)
        self.offsets = torch.cumsum(self.sizes, 0) - self.sizes
        self.cell_of = cell
        self.position = torch.empty_like(self.order)
        self.position[self.order] = torch.arange(len(self.order), device=gallery.device) \
            - self.offsets[cell[self.order]]
        self.sorted_gallery = gallery[self.order]
        self._sizes_list = self.sizes.tolist()
        self._offsets_list = self.offsets.tolist()

    @classmethod
    def build(cls, gallery: torch.Tensor, nlist: int, seed: int = 0,
              keep_nearest: int = 0) -> 'InvertedFile':
        """Centroids by :func:`spherical_kmeans` of the gallery, then the cells."""
        return cls(gallery, spherical_kmeans(gallery, nlist, seed=seed), keep_nearest)

    @staticmethod
    def probe_width(nlist: int, items: int, nprobe: int, candidates: Optional[int]) -> int:
        """Cells of nearest centroid that :meth:`probe` looks at first: ``nprobe``, or with
        ``candidates`` enough for that many items at 1.5x the mean cell size (a row that
        needs more is redone)."""
        if candidates is None:
            return nprobe
        return min(nprobe, 4 + -(-3 * candidates * nlist // (2 * max(1, items))))

    def auto_chunk_size(self, chunk_size: Optional[int], nprobe: int,
                        candidates: Optional[int], owner: str) -> int:
        """``chunk_size`` checked, or the most queries whose candidate block fits in 128 MB
        (its width estimated at 1.5x the mean candidates per query)."""
        if chunk_size is not None:
            return auto_chunk_size(chunk_size, 1, owner)
        mean = nprobe * max(1, len(self.order)) / self.nlist
        width = 1.5 * (mean if candidates is None else min(mean, candidates))
        return int(max(1, min(_MAX_AUTO_CHUNK, _BLOCK_BYTES // (4 * width))))

    def probe(self, queries: torch.Tensor, nprobe: int, candidates: Optional[int] = None,
              nearest: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The cells each query searches (rows x slots, -1 = an unused slot).

        The ``nprobe`` cells of nearest centroid; with ``candidates``, only the nearest of
        them until they hold at least that many items (the cell that reaches the count is
        the last), so that each query costs about the same however large its cells are.
        ``nearest``: the queries' cells by decreasing centroid similarity, when known.
        """
        width = self.probe_width(self.nlist, len(self.order), nprobe, candidates)
        if nearest is not None and nearest.shape[1] >= width:
            probes = nearest[:, :width].long()
        else:
            probes = torch.topk(queries @ self.centroids.T, width, dim=1,
                                sorted=candidates is not None).indices
        if candidates is None:
            return probes
        probes = self._within_budget(probes, candidates)
        short = (probes[:, -1] >= 0) & (self._reach(probes) < candidates)
        if width < nprobe and bool(short.any()):
            rows = short.nonzero().squeeze(1)
            wide = self._within_budget(
                torch.topk(queries[rows] @ self.centroids.T, nprobe, dim=1).indices, candidates)
            wide = wide[:, :int((wide >= 0).sum(dim=1).max())]
            if wide.shape[1] > probes.shape[1]:
                probes = F.pad(probes, (0, wide.shape[1] - probes.shape[1]), value=-1)
            probes[rows] = F.pad(wide, (0, probes.shape[1] - wide.shape[1]), value=-1)
        return probes[:, :int((probes >= 0).sum(dim=1).max())]

    def _reach(self, probes: torch.Tensor) -> torch.Tensor:
        """Items in each row's used cells."""
        return (self.sizes[probes.clamp(min=0)] * (probes >= 0)).sum(dim=1)

    def _within_budget(self, probes: torch.Tensor, candidates: int) -> torch.Tensor:
        """Cells (nearest first) past the one that reaches ``candidates`` items set to -1."""
        sizes = self.sizes[probes]
        probes[torch.cumsum(sizes, dim=1) - sizes >= candidates] = -1
        return probes

    def search(self,
               query: torch.Tensor,
               nprobe: int,
               chunk_size: int,
               exclude_self: bool = False,
               candidates: Optional[int] = None) -> Iterator[CandidateBlock]:
        """Candidate blocks of ``chunk_size`` queries at a time.

        Args:
            query: nq x D float32 tensor.
            nprobe: cells probed per query, 1 .. nlist.
            chunk_size: queries per block.
            exclude_self: query i is gallery item i; its own similarity is -inf.
            candidates: probe the nearest cells only until they hold this many items
                (:meth:`probe`).
        """
        device = self.sorted_gallery.device
        buffer = None
        for start in range(0, query.shape[0], chunk_size):
            queries = query[start:start + chunk_size].to(device)
            rows = len(queries)
            known = self.nearest[start:start + rows] \
                if exclude_self and self.nearest is not None else None
            probes = self.probe(queries, nprobe, candidates, known)
            used = probes >= 0
            sizes = self.sizes[probes.clamp(min=0)] * used
            ends = torch.cumsum(sizes, dim=1)
            starts = ends - sizes
            width = max(1, int(ends[:, -1].max()))
            if buffer is None or buffer.numel() < rows * width:
                buffer = torch.empty(rows * width, dtype=query.dtype, device=device)
            block = buffer[:rows * width].view(rows, width)
            _fill_past_ends(block, ends[:, -1])
            # (query, probe slot) pairs grouped by cell: one matrix product per cell.
            pairs = used.reshape(-1).nonzero().squeeze(1)
            flat = probes.reshape(-1)[pairs]
            by_cell = torch.argsort(flat, stable=True)
            query_of = pairs[by_cell] // probes.shape[1]
            destination = query_of * width + starts.reshape(-1)[pairs[by_cell]]
            self._products(queries, query_of, destination,
                           torch.bincount(flat, minlength=self.nlist).tolist(), buffer)
            if exclude_self:
                own_ids = torch.arange(start, start + rows, device=device)
                own = probes == self.cell_of[own_ids][:, None]
                hit = own.any(dim=1).nonzero().squeeze(1)
                slot = own[hit].int().argmax(dim=1)
                block[hit, starts[hit, slot] + self.position[own_ids[hit]]] = float('-inf')
            yield CandidateBlock(start, block, probes, starts, ends, self)

    def _products(self, queries: torch.Tensor, query_of: torch.Tensor,
                  destination: torch.Tensor, counts: list, buffer: torch.Tensor) -> None:
        """Each cell's items times the queries that probe it (``counts[cell]`` consecutive
        entries of ``query_of``), written into ``buffer`` from ``destination``.

        On a CPU the cells are shared among one thread per core, each running its products
        single-threaded: the index arithmetic, gathers and writes between products, which
        run on one core, then overlap the products (10-15 % faster on 2 cores than one
        multi-threaded product after another)."""
        write = _RowWriter(buffer)
        jobs, taken = [], 0
        for cell, count in enumerate(counts):
            if count and self._sizes_list[cell]:
                jobs.append((cell, slice(taken, taken + count)))
            taken += count

        if write.flat is not None:
            destination = destination.numpy()

        def run(share):
            for cell, part in share:
                offset, size = self._offsets_list[cell], self._sizes_list[cell]
                write(destination[part], queries.index_select(0, query_of[part])
                      @ self.sorted_gallery[offset:offset + size].T)

        threads = torch.get_num_threads()
        if buffer.device.type != 'cpu' or threads == 1:
            run(jobs)
            return
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(run, [jobs[w::threads] for w in range(threads)]))
        finally:
            torch.set_num_threads(threads)


def _nearest(sims: torch.Tensor, k: int) -> torch.Tensor:
    """Columns of each row's ``k`` largest values, largest first (an unsorted top-k and a
    sort of those is faster than a sorted top-k)."""
    vals, idx = torch.topk(sims, k, dim=1, sorted=False)
    return idx.gather(1, vals.argsort(dim=1, descending=True))


def _ordered(vals: torch.Tensor, ids: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rows by decreasing value, equal values by increasing index, padded to ``k``
    columns with -inf / -1."""
    ids = torch.where(torch.isfinite(vals), ids, torch.full_like(ids, -1))
    vals, ids = stable_order(vals, ids)
    if vals.shape[1] < k:
        pad = k - vals.shape[1]
        vals = F.pad(vals, (0, pad), value=float('-inf'))
        ids = F.pad(ids, (0, pad), value=-1)
    return vals, ids


def _fill_past_ends(block: torch.Tensor, ends: torch.Tensor) -> None:
    """-inf in each row of ``block`` from column ``ends[row]`` on (the rest is written)."""
    width = block.shape[1]
    if block.device.type != 'cpu':
        columns = torch.arange(width, device=block.device)
        block.masked_fill_(columns >= ends[:, None], float('-inf'))
        return
    short = (ends < width).nonzero().squeeze(1)
    rows = block.numpy()
    for row, end in zip(short.tolist(), ends[short].tolist()):
        rows[row, end:] = -np.inf


class _RowWriter:
    """Writes row i of an m x s block into a flat buffer from offset ``destination[i]``.

    On a CPU each row is a contiguous run: a strided numpy view of the buffer whose row j
    is the s elements from element j copies them with no index arithmetic per element
    (~0.2 ns per element; ``index_put_`` takes ~2 ns). One view per run length is kept."""

    def __init__(self, buffer: torch.Tensor, strided: Optional[bool] = None) -> None:
        self.buffer = buffer
        if strided is None:
            strided = buffer.device.type == 'cpu'
        self.flat = buffer.numpy() if strided else None
        self.runs = {}

    def __call__(self, destination, sims: torch.Tensor) -> None:
        """``destination``: a tensor, or a numpy array when the view is used."""
        size = sims.shape[1]
        if self.flat is None:
            index = destination[:, None] + torch.arange(size, device=self.buffer.device)
            self.buffer.scatter_(0, index.reshape(-1), sims.reshape(-1))
            return
        runs = self.runs.get(size)
        if runs is None:
            step = self.flat.strides[0]
            runs = np.lib.stride_tricks.as_strided(
                self.flat, shape=(len(self.flat) - size + 1, size), strides=(step, step))
            self.runs[size] = runs
        runs[destination] = sims.numpy()
