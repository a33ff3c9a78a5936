"""Descriptor analyses of El-Nouby et al. (IRT): dimensional collapse and pair similarities.

- :func:`cumulative_energy` / :func:`effective_dimension`: the cumulative
  energy of the principal components of the descriptors (Figs. 2 and 3 of the
  paper), and a single number summarising it.
- :func:`similarity_histograms`: histograms of the cosine similarities of
  positive and negative pairs (Fig. 5).

Both take N x D descriptors as a numpy array or a torch tensor, work in
float64 and never build an N x N matrix.
"""
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .checks import as_float_matrix

ArrayLike = Union[np.ndarray, torch.Tensor]

# Rows per block when accumulating the D x D scatter matrix (memory: block x D floats).
_SCATTER_BLOCK = 4096
# effective_dimension accepts a cumulative energy this far below ``fraction``:
# the rounding of the eigen-decomposition leaves e.g. 1 - 1e-16 where the exact value is 1.
_ENERGY_TOLERANCE = 1e-12


def _as_matrix(x: ArrayLike, name: str, owner: str, min_rows: int) -> np.ndarray:
    """``x`` as a 2-D numpy array of finite real values with >= ``min_rows`` rows, else an error."""
    x = as_float_matrix(x, name, owner, keep_float64=True).cpu().numpy()
    if len(x) < min_rows:
        raise ValueError(f'{owner}: {name} has {len(x)} rows; expected at least {min_rows}.')
    if x.shape[1] < 1:
        raise ValueError(f'{owner}: {name} has 0 columns; expected a dimension >= 1.')
    return x


def cumulative_energy(embeddings: ArrayLike) -> np.ndarray:
    """Cumulative energy of the principal components of the descriptors.

    With rows x_i of X (N x D) and their mean m, the covariance is
    C = (1/(N-1)) Σ_i (x_i − m)(x_i − m)ᵀ; its eigenvalues λ_1 >= ... >= λ_D
    (rounding negatives clipped to 0) give

        energy[k-1] = (λ_1 + ... + λ_k) / (λ_1 + ... + λ_D),

    so that energy[-1] == 1.0. A curve that reaches 1 after a few
    components means the descriptors have collapsed onto a few dimensions.

    The descriptors are taken as given: the retriever has already
    L2-normalised them, and they are not re-normalised here, so the curve is
    that of the space the retrieval searches. They are centred (PCA): the
    mean direction that normalised descriptors share is not a principal
    component of their spread.

    Memory is O(N·D + D²): the D x D scatter matrix is accumulated over
    blocks of rows in float64.

    Args:
        embeddings: N x D descriptors (N >= 2, finite).

    Returns:
        float64 array of shape (D,), non-decreasing, last value 1.0.
    """
    x = _as_matrix(embeddings, 'embeddings', 'cumulative_energy', min_rows=2)
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
                          query_mask: Optional[Union[ArrayLike, Sequence]] = None
                          ) -> Dict[str, Union[np.ndarray, int, float]]:
    """Histograms of the similarities of positive (same label) and negative pairs.

    Which pairs:

    - ``query_mask=None``: every unordered pair {i, j}, i < j, of the N
      descriptors, each counted once (a descriptor is never paired with
      itself);
    - ``query_mask`` given (N booleans): every (query, gallery) pair, query i
      with ``query_mask[i]``, gallery j without (e.g. In-Shop's split); pairs
      inside the queries or inside the gallery are left out.

    ``max_queries`` makes an estimate for large sets: that many rows (among
    the queries when ``query_mask`` is given) are drawn without replacement
    with ``seed`` and paired with every other descriptor (j != i; with
    ``query_mask``, every gallery descriptor). Each ordered pair is then
    equally likely to be counted, so the histograms estimate the distributions
    over all pairs; the counts are those of the pairs actually seen. With
    ``max_queries >=`` the number of candidate rows the result is exact.

    The similarity is the dot product of the L2-normalised descriptors (the
    cosine) when ``normalize``, else the raw dot product; it is computed in
    float64 and, when ``normalize``, clipped to [-1, 1] so that rounding
    cannot push a pair of identical (or opposite) descriptors out of range.
    Bins are those of ``np.histogram(values, bins, range)``: ``bins`` equal
    bins, each closed on the left, the last also on the right (1.0 falls in
    the last bin); values outside ``range`` are in no bin but are counted in
    ``num_*`` and ``mean_*``.

    Rows are processed ``chunk_size`` at a time: peak memory is a few
    ``chunk_size x N`` float64 matrices, never N x N.

    Args:
        embeddings: N x D descriptors (N >= 2, finite; no zero rows when
            ``normalize``).
        labels: N class labels (any comparable values).
        bins: number of equal-width bins.
        range: (low, high) of the histogram.
        chunk_size: query rows per block.
        max_queries: ``None`` (exact) or the number of rows to sample.
        seed: the seed of that sampling.
        normalize: L2-normalise the descriptors first (cosine similarity).
        query_mask: ``None`` (all pairs) or N booleans marking the queries.

    Returns:
        dict with ``edges`` (bins + 1 floats), ``positive`` and ``negative``
        (int64 counts per bin), ``num_positive`` / ``num_negative`` (pairs
        seen), ``mean_positive`` / ``mean_negative`` (their mean similarity,
        NaN for no pairs), ``exact`` (False when rows were sampled) and
        ``query_rows`` (the indices of the rows paired with the others, in
        increasing order: all rows, the queries, or the sampled ones).
    """
    owner = 'similarity_histograms'
    x = _as_matrix(embeddings, 'embeddings', owner, min_rows=2)
    n = len(x)
    labels = _as_vector(labels, 'labels', owner, n)
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f'{owner}: bins must be a positive integer, got {bins!r}.')
    low, high = (float(v) for v in range)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f'{owner}: range must be (low, high) with low < high, got {range!r}.')
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f'{owner}: chunk_size must be a positive integer, got {chunk_size!r}.')

    x = x.astype(np.float64)
    if normalize:
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        if (norms == 0).any():
            raise ValueError(f'{owner}: embeddings row {int(np.flatnonzero(norms == 0)[0])} is '
                             'zero, so its cosine similarity is undefined; expected non-zero '
                             'descriptors (or normalize=False).')
        x = x / norms

    if query_mask is None:
        rows, gallery = np.arange(n), None
    else:
        mask = _as_vector(query_mask, 'query_mask', owner, n)
        if mask.dtype != np.bool_:
            raise TypeError(f'{owner}: query_mask must hold booleans, got dtype {mask.dtype}.')
        rows, gallery = np.flatnonzero(mask), np.flatnonzero(~mask)
        if len(rows) == 0 or len(gallery) == 0:
            raise ValueError(f'{owner}: query_mask marks {len(rows)} queries and '
                             f'{len(gallery)} gallery descriptors; expected both non-empty.')
    if max_queries is not None and (isinstance(max_queries, bool) or not isinstance(
            max_queries, (int, np.integer)) or max_queries < 1):
        raise ValueError(f'{owner}: max_queries must be None or a positive integer, got '
                         f'{max_queries!r}.')
    exact = max_queries is None or max_queries >= len(rows)
    if not exact:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=max_queries,
                                                          replace=False))

    edges = np.histogram_bin_edges(np.empty(0), bins=bins, range=(low, high))
    counts = {True: np.zeros(bins, dtype=np.int64), False: np.zeros(bins, dtype=np.int64)}
    totals = {True: 0.0, False: 0.0}
    seen = {True: 0, False: 0}
    for start in np.arange(0, len(rows), chunk_size):
        block = rows[start:start + chunk_size]
        if gallery is not None:
            cols = gallery
            keep = None
        elif exact:
            # Rows come in increasing order: the partners j > i of this block start after its first row.
            cols = np.arange(block[0] + 1, n)
            keep = cols[None, :] > block[:, None]
        else:
            cols = np.arange(n)
            keep = cols[None, :] != block[:, None]
        sims = x[block] @ x[cols].T
        if normalize:
            np.clip(sims, -1.0, 1.0, out=sims)
        same = labels[block][:, None] == labels[cols][None, :]
        for positive in (True, False):
            select = same if positive else ~same
            if keep is not None:
                select = select & keep
            values = sims[select]
            counts[positive] += np.histogram(values, bins=bins, range=(low, high))[0]
            totals[positive] += float(values.sum(dtype=np.float64))
            seen[positive] += len(values)

    def mean(positive):
        return totals[positive] / seen[positive] if seen[positive] else float('nan')

    return dict(edges=edges, positive=counts[True], negative=counts[False],
                num_positive=seen[True], num_negative=seen[False],
                mean_positive=mean(True), mean_negative=mean(False), exact=bool(exact),
                query_rows=rows)


def _as_vector(v, name: str, owner: str, n: int) -> np.ndarray:
    """``v`` as a 1-D numpy array of length ``n``, else an error."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().numpy()
    v = np.asarray(v)
    if v.shape != (n, ):
        raise ValueError(f'{owner}: {name} must be 1-D with one entry per embedding ({n}), got '
                         f'shape {v.shape}.')
    return v
