"""Non-interpolated average precision of full gallery rankings, with junk removed."""
from typing import Sequence

import numpy as np

from .checks import ArrayLike
from .revisited import _as_ranks, junk_free_positions


def average_precision(ranks: ArrayLike, gnd: Sequence[dict]) -> np.ndarray:
    """Per-query average precision (AP) of a ranking, junk items ignored.

    The standard, non-interpolated AP (e.g. Manning, Raghavan, Schütze,
    *Introduction to Information Retrieval*, 2008, Sec. 8.4; the "AP" of
    TREC): for query i with positives ``ok`` and ignored items ``junk``,

    1. the junk items are removed from the ranking (column i of ``ranks``),
       as the revisited Oxford / Paris protocol does;
    2. the positives are ``ok`` minus ``junk`` (an item in both is ignored);
       n = their number;
    3. with p_j the 0-based position of the j-th positive (j = 0, 1, ...)
       in the junk-free ranking, AP = (1/n) Σ_j (j + 1) / (p_j + 1), i.e.
       the mean over the positives of the precision at each one's rank.
       Positives at 0 and 2 give (1 + 2/3) / 2 = 0.8333.

    This is *not* the trapezoid AP of the official Oxford / revisited code
    (:func:`~irtbox.evaluation.functional.revisited_map`, 0.7917 in that
    example); use that one to reproduce published ROxford5k / RParis6k
    numbers.

    ``ranks`` may be truncated (its top rows only); positives below the cut
    still count in n and contribute precision 0. A query without positives
    gets NaN: leave it out of the mean (``np.nanmean``).

    Args:
        ranks: n_db x n_q integer array or tensor; column i = database indices
            in order of decreasing similarity to query i (as returned by
            :func:`~irtbox.evaluation.functional.rank_database`, which ranks
            a chunk of queries at a time).
        gnd: n_q dicts with ``ok`` and optionally ``junk`` (database indices).

    Returns:
        aps: (n_q,) float64, AP of each query as a fraction in [0, 1], NaN
        where the query has no positives.
    """
    ranks = _as_ranks(ranks, 'average_precision')
    aps = np.empty(ranks.shape[1])
    for i, pos, n_ok in junk_free_positions(ranks, gnd, 'average_precision', junk_wins=True):
        # pos is increasing, so the j-th found positive has j + 1 positives up to it.
        aps[i] = np.sum(np.arange(1, len(pos) + 1) / (pos + 1)) / n_ok if n_ok else np.nan
    return aps
