"""Descriptor analyses of El-Nouby et al. (IRT): dimensional collapse and pair similarities.

- :func:`cumulative_energy` / :func:`effective_dimension`: the cumulative energy of the principal
  components of the descriptors (Figs. 2 and 3 of the paper), and a single number summarising it.
- :func:`similarity_histograms`: histograms of the cosine similarities of positive and negative
  pairs (Fig. 5) of a labelled set; :func:`ground_truth_histograms`: the same for queries against a
  database with per-query ground truth (revisited Oxford / Paris, the paper's Fig. 5).

All take descriptors as numpy arrays or torch tensors, work in float64 and
never build an N x N matrix.
"""
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.utils import track_iter_progress

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError
from .checks import ArrayLike, as_float_matrix, as_vector

__all__ = ['cumulative_energy', 'effective_dimension', 'similarity_histograms',
           'ground_truth_histograms']

# Rows per block when accumulating the D x D scatter matrix (memory: block x D floats).
_SCATTER_BLOCK = 4096
# effective_dimension accepts a cumulative energy this far below ``fraction``:
# the rounding of the eigen-decomposition leaves e.g. 1 - 1e-16 where the exact value is 1.
_ENERGY_TOLERANCE = 1e-12


def _as_matrix(x: ArrayLike, name: str, min_rows: int) -> np.ndarray:
    """``x`` as a 2-D numpy array of finite real values with >= ``min_rows`` rows, else an error."""
    x = as_float_matrix(x, name, keep_float64=True).cpu().numpy()
    if len(x) < min_rows:
        raise ValueError(f'{name} has {len(x)} rows; expected at least {min_rows}.')
    if x.shape[1] < 1:
        raise ValueError(f'{name} has 0 columns; expected a dimension >= 1.')
    return x


def cumulative_energy(embeddings: ArrayLike) -> np.ndarray:
    """Cumulative energy of the principal components of the descriptors.

    With rows x_i of X (N x D) and their mean m, the covariance is
    C = (1/(N-1)) Σ_i (x_i − m)(x_i − m)ᵀ; its eigenvalues λ_1 >= ... >= λ_D
    (rounding negatives clipped to 0) give

        energy[k-1] = (λ_1 + ... + λ_k) / (λ_1 + ... + λ_D),

    so that energy[-1] == 1.0; a curve that reaches 1 after a few components means
    collapse. The descriptors are taken as given (not re-normalised: the space the retrieval
    searches), and centred. Memory O(N·D + D²). ``embeddings``: N x D, N >= 2, finite.
    """
    x = _as_matrix(embeddings, 'embeddings', min_rows=2)
    n, d = x.shape
    mean = x.mean(axis=0, dtype=np.float64)
    scatter = np.zeros((d, d), dtype=np.float64)
    for start in range(0, n, _SCATTER_BLOCK):
        block = x[start:start + _SCATTER_BLOCK].astype(np.float64) - mean
        scatter += block.T @ block
    eigvals = np.clip(np.linalg.eigvalsh(scatter / (n - 1)), 0, None)[::-1]
    total = eigvals.sum()
    if total <= 0:
        raise ValueError(f'cumulative_energy: the {n} descriptors are all identical (zero '
                         'variance); expected descriptors that vary.')
    energy = np.cumsum(eigvals)
    return energy / energy[-1]


def effective_dimension(energy: ArrayLike, fraction: float = 0.9) -> int:
    """The smallest k such that the first k principal components hold ``fraction`` of the energy.

    I.e. the smallest k with energy[k-1] >= fraction (up to 1e-12 of
    rounding, so that ``fraction=1.0`` gives the rank of the descriptors).

    Args:
        energy: a cumulative energy as returned by :func:`cumulative_energy`.
        fraction: in (0, 1].
    """
    if isinstance(energy, torch.Tensor):
        energy = energy.detach().cpu().numpy()
    energy = np.asarray(energy, dtype=np.float64)
    if energy.ndim != 1 or len(energy) == 0:
        raise ValueError(f'effective_dimension: energy must be a non-empty 1-D array, got '
                         f'shape {energy.shape}.')
    if not np.isfinite(energy).all():
        raise ValueError('effective_dimension: energy contains NaN or infinite values.')
    if not 0 < fraction <= 1:
        raise ValueError(f'effective_dimension: fraction must be in (0, 1], got {fraction}.')
    reached = np.flatnonzero(energy >= fraction - _ENERGY_TOLERANCE)
    if len(reached) == 0:
        raise ValueError(f'effective_dimension: the energy never reaches {fraction} (its last '
                         f'value is {energy[-1]}); expected a cumulative energy ending at 1.')
    return int(reached[0]) + 1


def similarity_histograms(embeddings: ArrayLike, labels: Union[ArrayLike, Sequence],
                          bins: int = 200, range: Tuple[float, float] = (-1.0, 1.0),
                          chunk_size: int = 1024, max_queries: Optional[int] = None,
                          seed: int = 0, normalize: bool = True,
                          query_mask: Optional[Union[ArrayLike, Sequence]] = None,
                          progress: bool = False) -> Dict[str, Union[np.ndarray, int, float]]:
    """Histograms of the similarities of positive (same label) and negative pairs.

    Which pairs:

    - ``query_mask=None``: every unordered pair {i, j}, i < j, of the N descriptors, each counted
      once (a descriptor is never paired with itself);
    - ``query_mask`` given (N booleans): every (query, gallery) pair, query i
      with ``query_mask[i]``, gallery j without (e.g. In-Shop's split); pairs
      inside the queries or inside the gallery are left out.

    ``max_queries`` estimates for large sets: that many rows (queries, with ``query_mask``)
    are drawn with ``seed`` and paired with every other descriptor, so each ordered pair is
    equally likely; the counts are those of the pairs seen.

    The similarity is the cosine when ``normalize`` (float64, clipped to [-1, 1]), else the
    raw dot product. Bins are ``np.histogram(values, bins, range)``'s; values outside
    ``range`` count in ``num_*`` and ``mean_*`` only. Memory: a few ``chunk_size x N``
    float64 blocks.

    ``embeddings``: N x D (N >= 2, finite; no zero rows when ``normalize``); ``labels``: N
    comparable values; ``progress``: a progress bar over the row blocks.

    Returns:
        dict with ``edges`` (bins + 1 floats), ``positive`` and ``negative`` (int64 counts per bin),
        ``num_positive`` / ``num_negative`` (pairs seen), ``mean_positive`` / ``mean_negative``
        (their mean similarity, NaN for no pairs), ``exact`` (False when rows were sampled) and
        ``query_rows`` (the indices of the rows paired with the others, in
        increasing order: all rows, the queries, or the sampled ones).
    """
    x = _as_matrix(embeddings, 'embeddings', min_rows=2)
    n = len(x)
    labels = as_vector(labels, 'labels', n)
    low, high = _check_histogram_args(bins, range, chunk_size)
    x = _unit_rows(x, 'embeddings', normalize)

    if query_mask is None:
        rows, gallery = np.arange(n), None
    else:
        mask = as_vector(query_mask, 'query_mask', n)
        if mask.dtype != np.bool_:
            raise TypeError(f'query_mask must hold booleans, got dtype {mask.dtype}.')
        rows, gallery = np.flatnonzero(mask), np.flatnonzero(~mask)
        if len(rows) == 0 or len(gallery) == 0:
            raise ArgumentError(f'query_mask marks {len(rows)} queries and '
                                f'{len(gallery)} gallery descriptors; expected both non-empty.',
                                'query_mask')
    max_queries = check_positive_int(max_queries, 'max_queries', allow_none=True)
    exact = max_queries is None or max_queries >= len(rows)
    if not exact:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=max_queries,
                                                          replace=False))

    hist = _PairHistograms(bins, low, high)
    for start in _blocks(len(rows), chunk_size, progress):
        block = rows[start:start + chunk_size]
        if gallery is not None:
            cols, keep = gallery, True
        elif exact:
            # Rows come in increasing order: the partners j > i of this block start after its first row.
            cols = np.arange(block[0] + 1, n)
            keep = cols[None, :] > block[:, None]
        else:
            cols = np.arange(n)
            keep = cols[None, :] != block[:, None]
        sims = _similarities(x[block], x[cols], normalize)
        same = labels[block][:, None] == labels[cols][None, :]
        hist.add(sims, same & keep, ~same & keep)
    return dict(hist.result(), exact=bool(exact), query_rows=rows)


def ground_truth_histograms(query: ArrayLike, database: ArrayLike, gnd: Sequence[dict],
                            bins: int = 200, range: Tuple[float, float] = (-1.0, 1.0),
                            chunk_size: int = 1024, normalize: bool = True,
                            progress: bool = False) -> Dict[str, Union[np.ndarray, int, float]]:
    """Histograms of the (query, database) pair similarities of a ground truth given per query, e.g.
    the revisited Oxford / Paris protocols (IRT Fig. 5 uses RParis, Medium).

    For query q, the positives are ``gnd[q]['ok']``, the junk is left out, every other database item
    is a negative. Similarities, bins and the returned dict are as in :func:`similarity_histograms`.

    ``query`` n_q x D, ``database`` n_db x D; ``gnd`` as from
    :func:`~irtbox.evaluation.functional.build_revisited_gnd`.
    """
    q = _unit_rows(_as_matrix(query, 'query', min_rows=1), 'query', normalize)
    db = _unit_rows(_as_matrix(database, 'database', min_rows=1), 'database', normalize)
    if q.shape[1] != db.shape[1]:
        raise ArgumentError(f'query has dimension {q.shape[1]} but database has '
                            f'{db.shape[1]}; expected the same descriptors.', 'query')
    if len(gnd) != len(q):
        raise ArgumentError(f'gnd has {len(gnd)} entries for {len(q)} queries; expected '
                            'one per query.', 'gnd')
    low, high = _check_histogram_args(bins, range, chunk_size)
    masks = {}
    for i, g in enumerate(gnd):
        if not isinstance(g, dict) or 'ok' not in g:
            raise TypeError(f"gnd[{i}] must be a dict with 'ok' (and 'junk') database "
                            f'indices, got {g!r}.')
        for key in ('ok', 'junk'):
            idx = np.asarray(g.get(key, []), dtype=np.int64).reshape(-1)
            if len(idx) and (idx.min() < 0 or idx.max() >= len(db)):
                raise ValueError(f'gnd[{i}][{key!r}] has indices outside the '
                                 f'{len(db)} database items: {idx.min()} .. {idx.max()}.')
            masks[i, key] = idx
    hist = _PairHistograms(bins, low, high)
    for start in _blocks(len(q), chunk_size, progress):
        block = np.arange(start, min(start + chunk_size, len(q)))
        sims = _similarities(q[block], db, normalize)
        positive = np.zeros(sims.shape, dtype=bool)
        junk = np.zeros(sims.shape, dtype=bool)
        for row, i in enumerate(block):
            positive[row, masks[i, 'ok']] = True
            junk[row, masks[i, 'junk']] = True
        hist.add(sims, positive, ~positive & ~junk)
    return dict(hist.result(), exact=True, query_rows=np.arange(len(q)))


def _blocks(n: int, chunk_size: int, progress: bool):
    """The first row of each block of ``chunk_size`` rows, with a progress bar if asked."""
    starts = range(0, n, chunk_size)
    return track_iter_progress(starts) if progress else starts


def _check_histogram_args(bins, range, chunk_size) -> Tuple[float, float]:
    """Checks ``bins``, ``range`` and ``chunk_size``; returns (low, high)."""
    check_positive_int(bins, 'bins')
    check_positive_int(chunk_size, 'chunk_size')
    low, high = (float(v) for v in range)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ArgumentError(f'range must be (low, high) with low < high, got {range!r}.', 'range')
    return low, high


def _unit_rows(x: np.ndarray, name: str, normalize: bool) -> np.ndarray:
    """``x`` in float64, L2-normalised row by row when ``normalize``."""
    x = x.astype(np.float64)
    if not normalize:
        return x
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f'{name} row {int(np.flatnonzero(norms == 0)[0])} is '
                         'zero, so its cosine similarity is undefined; expected non-zero '
                         'descriptors (or normalize=False).')
    return x / norms


def _similarities(a: np.ndarray, b: np.ndarray, normalize: bool) -> np.ndarray:
    sims = a @ b.T
    if normalize:
        # Rounding must not push identical (or opposite) descriptors out of [-1, 1].
        np.clip(sims, -1.0, 1.0, out=sims)
    return sims


class _PairHistograms:
    """Running histograms, sums and counts of positive and negative pair similarities."""

    def __init__(self, bins: int, low: float, high: float):
        self.bins, self.range = bins, (low, high)
        self.counts = {True: np.zeros(bins, dtype=np.int64), False: np.zeros(bins, dtype=np.int64)}
        self.totals = {True: 0.0, False: 0.0}
        self.seen = {True: 0, False: 0}

    def add(self, sims: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> None:
        for kind, select in ((True, positive), (False, negative)):
            values = sims[select]
            self.counts[kind] += np.histogram(values, bins=self.bins, range=self.range)[0]
            self.totals[kind] += float(values.sum(dtype=np.float64))
            self.seen[kind] += len(values)

    def result(self) -> dict:
        def mean(kind):
            return self.totals[kind] / self.seen[kind] if self.seen[kind] else float('nan')

        return dict(edges=np.histogram_bin_edges(np.empty(0), bins=self.bins, range=self.range),
                    positive=self.counts[True], negative=self.counts[False],
                    num_positive=self.seen[True], num_negative=self.seen[False],
                    mean_positive=mean(True), mean_negative=mean(False))
