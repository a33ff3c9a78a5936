"""Non-interpolated average precision of full gallery rankings, with junk removed."""
from typing import Optional, Sequence, Union

import numpy as np
import torch

from .checks import ArrayLike
from .revisited import _as_ranks, _checked_gnd, _junk_free_ranks, junk_free_positions
from .ranking import auto_chunk_size, prepare_pair, similarity_blocks, stable_ranks

__all__ = ['average_precision', 'search_average_precision']


def average_precision(ranks: ArrayLike, gnd: Sequence[dict]) -> np.ndarray:
    """Per-query average precision (AP) of a ranking, junk items ignored.

    The standard, non-interpolated AP (e.g. Manning, Raghavan, Schütze,
    *Introduction to Information Retrieval*, 2008, Sec. 8.4; the "AP" of
    TREC): for query i with positives ``ok`` and ignored items ``junk``,

    1. the junk items are removed from the ranking (column i of ``ranks``),
       as the revisited Oxford / Paris protocol does;
    2. the positives are ``ok`` minus ``junk`` (an item in both is ignored); n = their number;
    3. with p_j the 0-based position of the j-th positive (j = 0, 1, ...) in the junk-free ranking,
       AP = (1/n) Σ_j (j + 1) / (p_j + 1), i.e. the mean over the positives of the precision at each
       one's rank. Positives at 0 and 2 give (1 + 2/3) / 2 = 0.8333.

    Not the trapezoid AP of the official revisited code
    (:func:`~irtbox.evaluation.functional.revisited_map`, 0.7917 in that example), which
    published ROxford5k / RParis6k numbers use. ``ranks`` may be truncated (positives below
    the cut count in n); a query without positives gets NaN.

    Args:
        ranks: n_db x n_q integer array or tensor; column i = database indices in order of
            decreasing similarity to query i (:func:`~irtbox.evaluation.functional.rank_database`).
        gnd: n_q dicts with ``ok`` and optionally ``junk`` (database indices).

    Returns:
        aps: (n_q,) float64, AP of each query as a fraction in [0, 1], NaN
        where the query has no positives.
    """
    ranks = _as_ranks(ranks)
    aps = np.empty(ranks.shape[1])
    for i, pos, n_ok in junk_free_positions(ranks, gnd, junk_wins=True):
        aps[i] = _mean_precision(pos, n_ok)
    return aps


def search_average_precision(query_emb: ArrayLike,
                             gallery_emb: ArrayLike,
                             gnd: Sequence[dict],
                             chunk_size: Optional[int] = None,
                             device: Optional[Union[str, torch.device]] = None) -> np.ndarray:
    """:func:`average_precision` of the full ranking by inner product, without ranking.

    Equals ``average_precision(rank_database(query_emb, gallery_emb), gnd)``, but per query only the
    positions of its ``ok`` and ``junk`` items in the stable order (ties to the lower index) are
    counted from its similarities (:func:`~irtbox.evaluation.functional.ranking.stable_ranks`).
    Memory: one similarity block of the search core.

    Args:
        query_emb: n_q x D; gallery_emb: N x D (inner products as given).
        gnd: n_q dicts with ``ok`` and optionally ``junk`` (gallery indices).
        chunk_size: queries per similarity block (``None``: a block of at most 128 MB).
        device: where the similarities are computed.

    Returns:
        aps: (n_q,) float64 as :func:`average_precision` (NaN: no positive).
    """
    query, gallery = prepare_pair(query_emb, gallery_emb, normalize=False,
                                  names=('query_emb', 'gallery_emb'))
    if len(gnd) != len(query):
        raise ValueError(f'search_average_precision: {len(query)} queries but gnd has '
                         f'{len(gnd)} entries; expected one ground-truth dict per query.')
    chunk_size = auto_chunk_size(chunk_size, len(gallery))
    aps = np.empty(len(query))
    for start, sims in similarity_blocks(query, gallery, chunk_size, device):
        for row, scores in enumerate(sims.cpu().numpy()):
            i = start + row
            ok, junk = _checked_gnd(gnd[i], f'gnd[{i}]', len(scores))
            ok = ok[~np.isin(ok, junk)]  # an item both ok and junk is junk
            items = np.union1d(ok, junk)
            pos = _junk_free_ranks(stable_ranks(scores, items), items, ok, junk)
            aps[i] = _mean_precision(pos, len(ok))
    return aps


def _mean_precision(pos: np.ndarray, n: int) -> float:
    """AP from the increasing 0-based positions of the found positives, ``n`` in all (NaN
    for none): the j-th found positive has j + 1 positives up to it."""
    return np.sum(np.arange(1, len(pos) + 1) / (pos + 1)) / n if n else np.nan
