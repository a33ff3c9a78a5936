"""The revisited Oxford / Paris evaluation (Radenović et al., CVPR 2018).

The official code's trapezoid AP, junk removal and mP@k, quirks included (docs/protocols.md,
"Revisited Oxford and Paris"), the Easy / Medium / Hard ground truth, a chunked full ranking
(the revisitop interface) and :func:`revisited_metrics`, the same numbers without a ranking.
"""
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from irtbox.utils.checks import check_positive_ints
from irtbox.utils.errors import ArgumentError
from .checks import ArrayLike
from .ranking import auto_chunk_size, prepare_pair, similarity_blocks, stable_ranks

__all__ = [
    'PROTOCOLS', 'build_revisited_gnd', 'revisited_map', 'revisited_metrics',
    'junk_free_positions', 'revisited_means', 'rank_database'
]

# Few queries, a large database: each similarity block reads the whole database again, so
# the blocks are larger than the search core's default.
_BLOCK_BYTES = 512 << 20

# Which of easy / hard / junk are positives and which are junk, per protocol.
PROTOCOLS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    'easy': (('easy', ), ('junk', 'hard')),
    'medium': (('easy', 'hard'), ('junk', )),
    'hard': (('hard', ), ('junk', 'easy')),
}


def build_revisited_gnd(gnd_raw: Sequence[dict], protocol: str) -> List[Dict[str, np.ndarray]]:
    """Per-query ``{'ok', 'junk'}`` index arrays of one protocol.

    Easy: ok = easy, junk = junk ∪ hard. Medium: ok = easy ∪ hard, junk = junk. Hard:
    ok = hard, junk = junk ∪ easy (concatenations in this order, as the official code).

    Args:
        gnd_raw: one dict per query with ``easy``, ``hard`` and ``junk`` (0-based database indices;
            a missing ``junk`` means none), as in ``gnd_roxford5k.pkl['gnd']``.
        protocol: 'easy', 'medium' or 'hard'.

    Returns:
        A list of ``{'ok': int64 array, 'junk': int64 array}``, one per query,
        the ``gnd`` argument of :func:`revisited_map`.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f'build_revisited_gnd: protocol must be one of {tuple(PROTOCOLS)}, '
                         f'got {protocol!r}.')
    ok_keys, junk_keys = PROTOCOLS[protocol]
    out = []
    for i, g in enumerate(gnd_raw):
        if not hasattr(g, 'get'):
            raise TypeError(f'build_revisited_gnd: gnd[{i}] must be a dict with easy / hard / '
                            f'junk, got {type(g).__name__}.')
        parts = {}
        for key in ('easy', 'hard', 'junk'):
            if g.get(key) is None and key != 'junk':
                raise KeyError(f"build_revisited_gnd: gnd[{i}] has no {key!r}; expected "
                               f"'easy', 'hard' and 'junk' index lists, got keys {sorted(g)}.")
            parts[key] = _as_indices(g.get(key, ()), f"gnd[{i}]['{key}']")
        both = np.intersect1d(parts['easy'], parts['hard'])
        if len(both):
            raise ValueError(f"build_revisited_gnd: gnd[{i}] lists database image(s) "
                             f"{both[:5].tolist()} as both 'easy' and 'hard'; expected "
                             'disjoint lists.')
        out.append(dict(ok=np.concatenate([parts[k] for k in ok_keys]),
                        junk=np.concatenate([parts[k] for k in junk_keys])))
    return out


def revisited_map(ranks: ArrayLike,
                  gnd: Sequence[dict],
                  kappas: Sequence[int] = (1, 5, 10)
                  ) -> Tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """mAP and mP@k of the revisited Oxford / Paris evaluation, as fractions.

    Per query, as docs/protocols.md, "Average precision, the official way", defines: positions
    of the positives with the junk removed, trapezoid AP = Σ_j (p0_j + p1_j) / (2n) with
    p0_j = 1 if p_j = 0 else j / p_j, p1_j = (j + 1) / (p_j + 1), n = len(ok); P@k with the
    official kq = min(max position, k); empty ``ok``: NaN, left out of the means.

    ``ranks`` may be truncated (the top rows of a ranking); positives below the cut still count in
    n. A query none of whose positives is found gets AP = P@k = 0 (the official code fails there).

    Args:
        ranks: n_db x n_q integer array or tensor; column i = database indices
            in order of decreasing similarity to query i.
        gnd: n_q dicts with ``ok`` and optionally ``junk`` (:func:`build_revisited_gnd`).

    Returns:
        (mAP, aps, mpr, prs): mAP (float; NaN if every ``ok`` is empty), aps
        (n_q float64, NaN for empty ``ok``), mpr (len(kappas), mean P@k over
        the queries with positives) and prs (n_q x len(kappas)).
    """
    ranks = _as_ranks(ranks)
    kappas = check_positive_ints(kappas, 'kappas')
    aps = np.empty(ranks.shape[1])
    prs = np.empty((ranks.shape[1], len(kappas)))
    for i, pos, n_ok in junk_free_positions(ranks, gnd):
        if n_ok == 0:
            aps[i] = np.nan
            prs[i] = np.nan
        else:
            aps[i], prs[i] = _ap_and_precisions(pos, n_ok, kappas)
    mean_ap, mpr = revisited_means(aps, prs)
    return mean_ap, aps, mpr, prs


def junk_free_positions(ranks: np.ndarray,
                        gnd: Sequence[dict],
                        junk_wins: bool = False) -> Iterator[Tuple[int, np.ndarray, int]]:
    """Per query, the 0-based positions of its positives in the ranking with the junk removed.

    Args:
        ranks: n_db x n_q integer array (checked by the caller with
            ``_as_ranks``); column i = database indices for query i.
        gnd: n_q dicts with ``ok`` and optionally ``junk`` (database indices).
        junk_wins: how an item both ``ok`` and ``junk`` counts. False (the official revisited
            code): it is a positive, and junk for the positives after it. True: it is junk only
            (positives = ok minus junk).

    Yields:
        ``(i, positions, n_ok)`` for each query in order: positions (int64,
        increasing; only the positives present in ``ranks``) and n_ok, the
        number of positives, including those below a truncated ranking.
    """
    n_q = ranks.shape[1]
    if len(gnd) != n_q:
        raise ArgumentError(f'ranks has {n_q} columns (queries) but gnd has '
                            f'{len(gnd)} entries; expected one ground-truth dict per query.',
                            'ranks')
    # Membership tables over the ranked indices: O(n_db) per query, however
    # long the positive and junk lists.
    size = int(ranks.max()) + 1 if ranks.size else 0
    in_ok = np.zeros(size, dtype=bool)
    in_junk = np.zeros(size, dtype=bool)
    for i, g in enumerate(gnd):
        # No database size: a truncated ranking may leave positives out of ``ranks``.
        ok, junk = _checked_gnd(g, f'gnd[{i}]', None)
        if junk_wins:
            ok = ok[~np.isin(ok, junk)]
        if len(ok) == 0:
            yield i, np.zeros(0, dtype=np.int64), 0
            continue
        ok_in, junk_in = ok[ok < size], junk[junk < size]
        in_ok[ok_in] = True
        in_junk[junk_in] = True
        column = ranks[:, i]
        pos = np.flatnonzero(in_ok[column])
        junk_pos = np.flatnonzero(in_junk[column])
        in_ok[ok_in] = False
        in_junk[junk_in] = False
        # Junk strictly before each positive (an item both ok and junk is not
        # counted against itself, as in the official code).
        yield i, pos - np.searchsorted(junk_pos, pos, side='left'), len(ok)


def revisited_means(aps: np.ndarray, prs: np.ndarray) -> Tuple[float, np.ndarray]:
    """(mAP, mpr): means of per-query APs and P@k over the queries whose AP is not NaN.

    Lets results computed for chunks of queries be combined exactly as
    :func:`revisited_map` combines them.
    """
    valid = ~np.isnan(aps)
    if not valid.any():
        return float('nan'), np.full(prs.shape[1], np.nan)
    return float(aps[valid].mean()), prs[valid].mean(axis=0)


def rank_database(query_emb: ArrayLike,
                  db_emb: ArrayLike,
                  chunk_size: int = 64,
                  device: Optional[Union[str, torch.device]] = None) -> ArrayLike:
    """The full ranking of the database for every query, by decreasing inner product.

    Ties keep the lower database index first; ``chunk_size`` queries at a time. Inner
    products as given (float64 stays float64, anything else is float32).

    Args:
        query_emb: n_q x D array or tensor.
        db_emb: n_db x D array or tensor.
        chunk_size: queries ranked at once.
        device: where to compute (default: the query tensor's device, CPU for numpy input).

    Returns:
        ranks: n_db x n_q int64, column i = database indices for query i (the official convention);
            a numpy array for numpy input, a tensor on the query's device for tensor input.
    """
    as_tensor = isinstance(query_emb, torch.Tensor)
    out_device = query_emb.device if as_tensor else torch.device('cpu')
    query, db = prepare_pair(query_emb, db_emb, normalize=False, names=('query_emb', 'db_emb'),
                             keep_float64=True, role='database', check_gallery=False)
    chunk_size = auto_chunk_size(chunk_size, db.shape[0])
    device = torch.device(device) if device is not None else out_device
    ranks = torch.empty(db.shape[0], query.shape[0], dtype=torch.long, device=out_device)
    for start, sims in similarity_blocks(query, db, chunk_size, device, checked='db_emb'):
        order = torch.sort(sims, dim=1, descending=True, stable=True).indices
        ranks[:, start:start + len(sims)] = order.T.to(out_device)
    return ranks if as_tensor else ranks.numpy()


def revisited_metrics(query_emb: ArrayLike,
                      db_emb: ArrayLike,
                      gnds: Mapping[str, Sequence[dict]],
                      kappas: Sequence[int] = (1, 5, 10),
                      chunk_size: Optional[int] = None,
                      device: Optional[Union[str, torch.device]] = None,
                      reranked: Optional[np.ndarray] = None
                      ) -> Dict[str, Tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`revisited_map` of the full ranking by inner product, without ranking.

    Equals ``revisited_map(rank_database(query_emb, db_emb), gnd, kappas)`` for each ground
    truth, but per query only the positions of its ``ok`` and ``junk`` items are counted
    (:func:`~irtbox.evaluation.functional.ranking.stable_ranks`). Memory: one
    chunk_size x n_db similarity block.

    Args:
        query_emb: n_q x D; db_emb: n_db x D (arrays or tensors; inner products
            as given, float64 kept).
        gnds: {name: n_q dicts with ``ok`` and optionally ``junk``}, e.g.
            ``{p: build_revisited_gnd(raw, p) for p in ('easy', 'medium', 'hard')}``.
        kappas: the k of mP@k.
        chunk_size: queries per similarity block (``None``: a block of at
            most 512 MB, e.g. 128 queries at 1M images).
        device: where the similarities are computed (default: the query's).
        reranked: n_q x K database indices that head each query's ranking (a re-ranked
            shortlist, :mod:`~irtbox.evaluation.functional.rerankers`); the other items follow
            in the order of the inner products.

    Returns:
        {name: (mAP, aps, mpr, prs)} as :func:`revisited_map` returns them.
    """
    kappas = check_positive_ints(kappas, 'kappas')
    query, db = prepare_pair(query_emb, db_emb, normalize=False, names=('query_emb', 'db_emb'),
                             keep_float64=True, role='database', check_gallery=False)
    n_q, n_db = query.shape[0], db.shape[0]
    chunk_size = auto_chunk_size(chunk_size, n_db, _BLOCK_BYTES)
    checked = {name: [_checked_gnd(g, f'gnds[{name!r}][{i}]', n_db) for i, g in enumerate(gnd)]
               for name, gnd in gnds.items()}
    for name, gnd in checked.items():
        if len(gnd) != n_q:
            raise ValueError(f'revisited_metrics: gnds[{name!r}] has {len(gnd)} entries but '
                             f'there are {n_q} queries; expected one ground-truth dict per '
                             'query.')
    aps = {name: np.empty(n_q) for name in checked}
    prs = {name: np.empty((n_q, len(kappas))) for name in checked}
    for start, sims in similarity_blocks(query, db, chunk_size, device, checked='db_emb'):
        sims = sims.cpu().numpy()
        for row, scores in enumerate(sims):
            i = start + row
            # Every ground truth names items of one small set: rank it once.
            items = np.unique(np.concatenate([a for gnd in checked.values() for a in gnd[i]]))
            item_ranks = stable_ranks(scores, items)
            if reranked is not None:
                item_ranks = _after_shortlist(item_ranks, items, scores, reranked[i])
            for name, gnd in checked.items():
                ok, junk = gnd[i]
                if len(ok) == 0:
                    aps[name][i], prs[name][i] = np.nan, np.nan
                    continue
                pos = _junk_free_ranks(item_ranks, items, ok, junk)
                aps[name][i], prs[name][i] = _ap_and_precisions(pos, len(ok), kappas)
    out = {}
    for name in checked:
        mean_ap, mpr = revisited_means(aps[name], prs[name])
        out[name] = (mean_ap, aps[name], mpr, prs[name])
    return out


def _after_shortlist(item_ranks: np.ndarray, items: np.ndarray, scores: np.ndarray,
                     shortlist: np.ndarray) -> np.ndarray:
    """Positions of ``items`` in the ranking ``shortlist`` then every other item in the order of
    ``scores``: an item outside the shortlist moves up by the shortlist items it had above it."""
    shortlist = np.asarray(shortlist, dtype=np.int64)
    short_ranks = np.sort(stable_ranks(scores, shortlist))
    out = len(shortlist) + item_ranks - np.searchsorted(short_ranks, item_ranks)
    inside = np.isin(items, shortlist)
    where = {int(j): t for t, j in enumerate(shortlist)}
    out[inside] = [where[int(j)] for j in items[inside]]
    return out


def _junk_free_ranks(item_ranks: np.ndarray, items: np.ndarray, ok: np.ndarray,
                    junk: np.ndarray) -> np.ndarray:
    """The increasing positions of the ``ok`` items in a ranking with the ``junk`` removed,
    from the positions ``item_ranks`` of the sorted ``items`` (which hold both)."""
    pos = np.sort(item_ranks[np.searchsorted(items, ok)])
    junk_pos = np.sort(item_ranks[np.searchsorted(items, junk)])
    return pos - np.searchsorted(junk_pos, pos, side='left')


def _checked_gnd(g, name: str, n_db: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
    """(ok, junk) index arrays of the ground-truth dict ``g``, called ``name`` in the errors
    (``gnd[3]``), checked against a database of ``n_db`` items (no range check when None)."""
    if not hasattr(g, 'get') or g.get('ok') is None:
        raise KeyError(f"{name} must be a dict with an 'ok' index list (and optionally "
                       "'junk').")
    ok = _as_indices(g['ok'], f"{name}['ok']")
    junk = _as_indices(g.get('junk', ()), f"{name}['junk']")
    if len(np.unique(ok)) != len(ok):
        raise ValueError(f"{name}['ok'] repeats a database index; expected each positive "
                         'once.')
    for key, idx in (('ok', ok), ('junk', junk)):
        if n_db is not None and len(idx) and idx.max() >= n_db:
            raise ValueError(f"{name}['{key}'] holds database index {idx.max()}, but the "
                             f'database has {n_db} items.')
    return ok, np.unique(junk)


def _ap_and_precisions(pos: np.ndarray, n: int,
                       kappas: Tuple[int, ...]) -> Tuple[float, np.ndarray]:
    """Trapezoid AP and official P@k of one query from its junk-free 0-based positions."""
    if len(pos) == 0:
        return 0.0, np.zeros(len(kappas))
    j = np.arange(len(pos), dtype=np.float64)
    r = pos.astype(np.float64)
    p0 = np.divide(j, r, out=np.ones_like(j), where=r > 0)
    p1 = (j + 1) / (r + 1)
    ap = float(np.sum((p0 + p1) / 2) / n)
    one_based = pos + 1
    top = one_based.max()
    precisions = np.empty(len(kappas))
    for c, k in enumerate(kappas):
        kq = min(top, k)
        precisions[c] = np.count_nonzero(one_based <= kq) / kq
    return ap, precisions


def _as_ranks(ranks: ArrayLike) -> np.ndarray:
    """``ranks`` (n_db x n_q integer array or tensor) as a numpy array, else an error naming it."""
    if isinstance(ranks, torch.Tensor):
        ranks = ranks.detach().cpu().numpy()
    ranks = np.asarray(ranks)
    if ranks.ndim != 2:
        raise ArgumentError(f'ranks must be 2-D (n_db x n_q, one column per query), got shape '
                            f'{ranks.shape}.', 'ranks')
    if ranks.size and not np.issubdtype(ranks.dtype, np.integer):
        raise TypeError(f'ranks must hold integer database indices, got dtype {ranks.dtype}.')
    if ranks.size and ranks.min() < 0:
        raise ArgumentError(f'ranks holds negative database indices (e.g. {ranks.min()}).', 'ranks')
    return ranks


def _as_indices(values, name: str) -> np.ndarray:
    """A 1-D int64 array of non-negative indices (an empty list is fine)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f'{name} must be a 1-D list of integer database indices, got '
                         f'shape {arr.shape} and dtype {arr.dtype}.')
    if arr.min() < 0:
        raise ValueError(f'{name} holds a negative database index ({arr.min()}).')
    return arr.astype(np.int64)
