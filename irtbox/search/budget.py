"""Which faiss index fits a memory budget, after faiss's guidelines
(https://github.com/facebookresearch/faiss/wiki/Guidelines-to-choose-an-index): the exact
``Flat`` when N x D x 4 bytes fit; else an inverted file (``IVF<nlist>``, nlist a power of two
near 4 sqrt(N); ``_HNSW32`` centroid search from HNSW_LISTS lists on) over ``SQ8`` codes (D
bytes each), else over ``PQ<m>`` codes (the largest m dividing D that fits); every IVF entry
also stores its 8-byte id. The codes need not be exact: the build re-ranks a shortlist exactly.
autofaiss is not used: its releases pin ``numpy<2`` and bring pandas, pyarrow and fsspec."""
import math
import re
from dataclasses import dataclass
from typing import List, Optional

from irtbox.utils.errors import ArgumentError

__all__ = ['IndexBudgetError', 'IndexPlan', 'parse_size', 'format_size', 'plan_index',
           'index_candidates']

_UNITS = {'': 1, 'K': 2**10, 'M': 2**20, 'G': 2**30, 'T': 2**40}
# Training points per IVF list (faiss warns under 39) and per PQ centroid (256 of them).
POINTS_PER_LIST = 39
PQ_TRAINING_POINTS = 256 * 39
# The vectors read and added at a time (bounded memory whatever N is).
CHUNK_ROWS = 65536
# Lists from which the centroids are searched through HNSW32 (per centroid: its links, about
# 300 bytes, besides its D floats).
HNSW_LISTS = 4096
HNSW_BYTES = 300


class IndexBudgetError(ArgumentError):
    """No index fits the memory budget ``argument`` (of ``value`` bytes)."""


def parse_size(text: str) -> int:
    """Bytes from ``'4G'``, ``'512M'``, ``'1.5G'``, ``'1000000'`` (K/M/G/T are powers of
    1024; a trailing ``B``/``iB`` is allowed). ValueError naming the text otherwise."""
    match = re.fullmatch(r'\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?\s*', str(text).upper())
    if not match or float(match.group(1)) <= 0:
        raise ArgumentError(f'memory size {text!r}: expected a positive number with an '
                            'optional unit K, M, G or T (powers of 1024), e.g. 4G or 512M',
                            'size', text)
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def format_size(size: float) -> str:
    """``size`` bytes as ``'3.7G'`` (the units :func:`parse_size` reads), rounded up."""
    for unit in ('T', 'G', 'M', 'K'):
        if size >= _UNITS[unit]:
            return f'{math.ceil(10 * size / _UNITS[unit]) / 10:g}{unit}'
    return f'{int(size)}'


@dataclass(frozen=True)
class IndexPlan:
    """One index for N x D vectors: its faiss factory string, the bytes it takes in memory
    (``index_bytes``), the vectors it trains on (``train_rows``) and what the build holds
    at its peak (``build_bytes``: the index, the training sample and one chunk)."""
    factory: str
    index_bytes: int
    train_rows: int
    build_bytes: int


def _nlist(n: int) -> int:
    """IVF lists: a power of two near 4 sqrt(N), with at least POINTS_PER_LIST points each."""
    target = max(1, 2 ** round(math.log2(max(1.0, 4 * math.sqrt(n)))))
    while target > 1 and target * POINTS_PER_LIST > n:
        target //= 2
    return target


def index_candidates(n: int, dim: int) -> List[IndexPlan]:
    """The indexes considered for ``n`` x ``dim`` vectors, best recall first (the exact
    ``Flat``, ``IVF,SQ8``, ``IVF,PQ<m>`` by decreasing m), with their memory."""
    chunk = min(n, CHUNK_ROWS) * dim * 4
    plans = [IndexPlan('Flat', n * dim * 4, 0, n * dim * 4 + chunk)]
    nlist = _nlist(n)
    if nlist < 2:  # too few vectors for an inverted file: Flat is all there is
        return plans
    ivf = f'IVF{nlist}' + ('_HNSW32' if nlist >= HNSW_LISTS else '')
    centroids = nlist * (dim * 4 + (HNSW_BYTES if nlist >= HNSW_LISTS else 0))
    train = min(n, max(POINTS_PER_LIST * nlist, PQ_TRAINING_POINTS))

    def plan(factory, index_bytes):
        return IndexPlan(factory, int(index_bytes), train,
                         int(index_bytes + train * dim * 4 + chunk))
    plans.append(plan(f'{ivf},SQ8', n * (dim + 8) + centroids + 2 * dim * 4))
    # PQ needs 256 x 39 training points.
    if n >= PQ_TRAINING_POINTS:
        # No precomputed distance tables: faiss makes none for inner-product lists.
        # Sub-vectors of 2 to 64 dimensions (longer ones lose most of the vector).
        for m in sorted((m for m in range(max(1, -(-dim // 64)), dim // 2 + 1)
                         if dim % m == 0), reverse=True):
            # 'np': no polysemous training (it only serves Hamming filtering, not used here).
            plans.append(plan(f'{ivf},PQ{m}np',
                              n * (m + 8) + centroids + 256 * dim * 4))
    return plans


def plan_index(n: int, dim: int, max_index_memory: Optional[int],
               max_build_memory: Optional[int] = None) -> IndexPlan:
    """The best index (:func:`index_candidates` order) of at most ``max_index_memory`` bytes
    (None: any size) whose build's peak is at most ``max_build_memory`` (the training sample
    cut down to 39 points per list to fit). :class:`IndexBudgetError` names the smallest budget
    that fits."""
    if n < 1 or dim < 1:
        raise ArgumentError(f'plan_index: no vectors to index ({n} x {dim})', 'n', n)
    candidates = index_candidates(n, dim)
    fits = [p for p in candidates if max_index_memory is None or p.index_bytes <= max_index_memory]
    for plan in fits:
        if max_build_memory is None or plan.build_bytes <= max_build_memory:
            return plan
        least = _least_training(plan, dim)
        if least.build_bytes <= max_build_memory:
            room = (max_build_memory - plan.build_bytes + plan.train_rows * dim * 4) // (dim * 4)
            train = max(least.train_rows, min(plan.train_rows, room))
            return IndexPlan(plan.factory, plan.index_bytes, train,
                             plan.build_bytes - (plan.train_rows - train) * dim * 4)
    smallest = min(candidates, key=lambda p: p.index_bytes)
    if not fits:
        raise IndexBudgetError(
            f'max_index_memory {format_size(max_index_memory)} is too small for {n} x {dim} '
            f'vectors: the smallest index, {smallest.factory}, needs '
            f'{format_size(smallest.index_bytes)}', 'max_index_memory', max_index_memory)
    least = min((_least_training(p, dim) for p in fits), key=lambda p: p.build_bytes)
    within = ('of any index' if max_index_memory is None else
              f'that fits the index budget {format_size(max_index_memory)}')
    raise IndexBudgetError(
        f'max_build_memory {format_size(max_build_memory)} is too small for {n} x {dim} '
        f'vectors: the smallest build {within}, {least.factory}, needs '
        f'{format_size(least.build_bytes)}', 'max_build_memory', max_build_memory)


def _least_training(plan: IndexPlan, dim: int) -> IndexPlan:
    """``plan`` trained on the fewest points faiss accepts without warning."""
    if not plan.train_rows:
        return plan
    nlist = int(re.match(r'IVF(\d+)', plan.factory).group(1))
    least = min(plan.train_rows, POINTS_PER_LIST * nlist)
    if 'PQ' in plan.factory:
        least = max(least, min(plan.train_rows, PQ_TRAINING_POINTS))
    return IndexPlan(plan.factory, plan.index_bytes, least,
                     plan.build_bytes - (plan.train_rows - least) * dim * 4)
