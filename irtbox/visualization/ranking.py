"""What each shown query retrieved: its top-k, which results are right, wrong or junk, its AP,
the rank of its first correct result and the classes that come before it.

Only the shown queries are ranked in full; choosing them needs only the top-1 of a random pool a few
times larger than the sample, so the cost grows with the queries shown, not with the test set.
"""
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from irtbox.evaluation.functional import average_precision, knn, rank_database
from irtbox.evaluation.neighbours import ExactSearcher

__all__ = ['label_ground_truth', 'top1_failures', 'select_queries', 'analyze_queries']

CORRECT, WRONG, JUNK = 'correct', 'wrong', 'junk'


def label_ground_truth(query_labels: np.ndarray, gallery_labels: np.ndarray,
                       rows: Sequence[int], exclude_self: bool = False) -> List[dict]:
    """``{'ok', 'junk'}`` gallery indices of the queries ``rows`` (indices into
    ``query_labels``), one dict per row: ``ok`` the gallery items with the query's label;
    with ``exclude_self`` (leave-one-out: query i is gallery item i) i is junk of query i."""
    order = np.argsort(gallery_labels, kind='stable')
    sorted_labels, wanted = gallery_labels[order], query_labels[np.asarray(rows, dtype=np.int64)]
    lo, hi = (np.searchsorted(sorted_labels, wanted, side) for side in ('left', 'right'))
    return [dict(ok=np.sort(order[a:b]),
                 junk=np.asarray([int(row)] if exclude_self else [], dtype=np.int64))
            for row, a, b in zip(rows, lo, hi)]


def _normalized(x) -> torch.Tensor:
    return F.normalize(torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32)), dim=1)


def top1_failures(query_emb: np.ndarray, gallery_emb: np.ndarray, rows: Sequence[int], gnd_of,
                  exclude_self: bool = False, chunk_size: int = 1024) -> np.ndarray:
    """(len(rows),) bool: whether the nearest gallery item of each query of ``rows`` is
    wrong (neither ok nor junk).

    ``gnd_of(rows)`` returns the ``{'ok', 'junk'}`` dicts of those query rows (e.g.
    :func:`label_ground_truth` bound to the labels): a cheap screen, one exact top-1 search
    per row (top-2 in leave-one-out mode).
    """
    rows = np.asarray(rows, dtype=np.int64)
    k = min(2 if exclude_self else 1, len(gallery_emb))
    _, top = knn(query_emb[rows], gallery_emb, k=k, searcher=ExactSearcher(chunk_size))
    if exclude_self:
        # The query itself is normally first; drop it wherever it is, keep the best other.
        top = np.where(top[:, :1] == rows[:, None], top[:, 1:], top[:, :1])
    top = top[:, 0]
    failed = np.zeros(len(rows), dtype=bool)
    for j, g in enumerate(gnd_of(rows)):
        failed[j] = top[j] not in g['ok'] and top[j] not in g['junk']
    return failed


def select_queries(n_queries: int, num: int, failures: Optional[np.ndarray] = None,
                   seed: int = 0) -> np.ndarray:
    """A reproducible sample of ``num`` query rows (all of them if ``num >= n_queries``).

    Up to half of the sample are failures (``failures[i]`` True), drawn at random with
    ``seed``; the rest is drawn from the other queries, so a good model still shows
    its mistakes and a bad one still shows successes. Returned sorted.
    """
    if num >= n_queries:
        return np.arange(n_queries)
    rng = np.random.default_rng(seed)
    if failures is None:
        return np.sort(rng.choice(n_queries, num, replace=False))
    bad, good = np.flatnonzero(failures), np.flatnonzero(~failures)
    n_bad = min(len(bad), max(num // 2, num - len(good)))
    chosen = np.concatenate([rng.choice(bad, n_bad, replace=False),
                             rng.choice(good, num - n_bad, replace=False)])
    return np.sort(chosen)


def analyze_queries(query_emb: np.ndarray, gallery_emb: np.ndarray, rows: Sequence[int],
                    gnd: Sequence[dict], k: int = 8, gallery_labels: Optional[np.ndarray] = None,
                    exclude_self: bool = False, chunk_size: int = 64,
                    max_confusions: int = 3) -> List[dict]:
    """Ranks the gallery for each query of ``rows`` and describes the result.

    Similarity is the cosine (rows L2-normalised), ties to the lower gallery index. In leave-one-out
    mode (``exclude_self``: query i is gallery item i) the query itself is removed from the shown
    ranking; ``gnd`` must then list it as junk (:func:`label_ground_truth` does).

    ``gnd``: one ``{'ok', 'junk'}`` dict per row (gallery indices); ``k`` results kept per
    query; ``gallery_labels`` (n_g,) give the confusions (None: none), at most
    ``max_confusions``; ``chunk_size`` queries are ranked at once (memory O(chunk_size x n_g)).

    Returns:
        One dict per row: ``query``, ``results`` (top-k gallery indices), ``scores``,
        ``status`` ('correct' / 'wrong' / 'junk' each), ``ap`` (over the whole ranking, junk
        removed; NaN without a correct item), ``n_relevant``, ``first_correct`` (1-based rank, or
        None), ``failure`` (a wrong result before the first correct one) and ``confusions``
        (``[(label, count), ...]`` of the wrong results before it, most frequent first).
    """
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) != len(gnd):
        raise ValueError(f'analyze_queries: {len(rows)} rows but {len(gnd)} ground-truth '
                         'entries; expected one per row.')
    q, g = _normalized(query_emb), _normalized(gallery_emb)
    out = []
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start:start + chunk_size]
        cgnd = gnd[start:start + chunk_size]
        ranks = rank_database(q[chunk], g, chunk_size=chunk_size).numpy()
        aps = average_precision(ranks, cgnd)
        for j, row in enumerate(chunk):
            column = ranks[:, j]
            if exclude_self:
                column = column[column != row]
            out.append(_describe(int(row), column, cgnd[j], float(aps[j]), q[row], g, k,
                                 gallery_labels, max_confusions))
    return out


def _describe(row, column, gt, ap, query, gallery, k, gallery_labels, max_confusions) -> dict:
    junk = np.asarray(gt.get('junk', ()), dtype=np.int64)
    ok = np.setdiff1d(np.asarray(gt['ok'], dtype=np.int64), junk)
    is_junk = np.isin(column, junk)
    is_ok = np.isin(column, ok) & ~is_junk
    correct_at = np.flatnonzero(is_ok)
    first = int(correct_at[0]) if len(correct_at) else None
    counted = ~is_junk
    failure = first is None or bool((counted[:first] & ~is_ok[:first]).any())
    top = column[:k]
    status = np.where(is_junk[:k], JUNK, np.where(is_ok[:k], CORRECT, WRONG)).tolist()
    scores = (gallery[torch.from_numpy(top)] @ query).numpy()
    confusions = []
    if gallery_labels is not None:
        stop = first if first is not None else len(top)
        wrong = column[:stop][counted[:stop] & ~is_ok[:stop]]
        labels, first_seen, counts = np.unique(gallery_labels[wrong], return_index=True,
                                               return_counts=True)
        order = sorted(range(len(labels)), key=lambda i: (-counts[i], first_seen[i]))
        confusions = [(labels[i].item(), int(counts[i])) for i in order[:max_confusions]]
    return dict(query=row, results=top, scores=scores, status=status, ap=ap,
                n_relevant=len(ok), first_correct=None if first is None else first + 1,
                failure=failure, confusions=confusions)
