"""Every retrieval metric of a labelled query set from one streamed nearest-neighbour search.

A searcher (:mod:`irtbox.evaluation.neighbours`) yields the top k of a chunk of queries at a time;
each block is turned into per-query scalars (rank of the first correct item, AP@R, R-precision,
Precision@1) and dropped, so the extra memory is one block, whatever the number of queries.
"""
from typing import Dict, Iterable, Union

import numpy as np
import torch

from irtbox.utils.checks import check_positive_ints
from ..neighbours import ExactSearcher, Searcher, build_searcher
from .checks import ArrayLike, label_codes
from .map_at_r import count_relevant, map_at_r_means, map_at_r_per_query
from .ranking import prepare_pair, rank_of
from .recall import first_hit_ranks, recall_from_first_hit

__all__ = ['retrieval_metrics', 'recall_at_k', 'map_at_r']

# Approximate search is reported with the recall of its top 10 against exact search, on
# a seeded sample of this many queries (5000 neighbours: a standard error of ~0.1 point at
# 99 %; the exact search of the sample is 1 / 120 of an exact evaluation of SOP).
SEARCH_RECALL_K = 10
SEARCH_RECALL_QUERIES = 500
# Rows whose first correct item is counted at once.
_COUNT_ROWS = 64

SearcherSetting = Union[None, dict, Searcher]


def retrieval_metrics(query_emb,
                      query_labels,
                      gallery_emb=None,
                      gallery_labels=None,
                      ks: Iterable[int] = (1, ),
                      map_at_r: bool = True,
                      searcher: SearcherSetting = None,
                      normalize: bool = True) -> Dict[str, float]:
    """Recall@K and MAP@R / R-precision / Precision@1 from ONE search.

    Recall@K needs only the rank of each query's first correct item, MAP@R only the top R_i
    (R_i = gallery items with query i's label). An exhaustive searcher (``ExactSearcher``,
    the default) selects each chunk's top max(R_i) and counts the rank of a first correct
    item beyond it in the similarity block; any other searcher is asked for the top
    max(max(ks), max R_i). Ties go to the lower gallery index, as in a full stable sort.

    Args:
        query_emb: nq x D embeddings (numpy array or torch tensor).
        query_labels: nq labels (numpy array, tensor or list).
        gallery_emb, gallery_labels: N x D and N. Both ``None``:
            leave-one-out, the queries are the gallery and query i is
            excluded from its own search by index (SOP, CUB, Cars protocol).
            Given: queries are searched in this gallery only (In-Shop).
        ks: the K of Recall@K.
        map_at_r: also compute MAP@R, R-precision and Precision@1.
        searcher: a :class:`~irtbox.evaluation.neighbours.Searcher` or its config dict;
            ``None``: ``ExactSearcher()``. For galleries too large for exact search, e.g.
            ``dict(type='FaissSearcher', factory='IVF4096,Flat', nprobe=32)``.
        normalize: L2-normalise the embeddings first (cosine similarity).

    Returns:
        ``{'recall@K': ...}`` for each K and, with ``map_at_r``, ``'map@r'``, ``'r_precision'``,
        ``'precision@1'``; all fractions in [0, 1]. Recall@K counts every query; MAP@R, R-precision
        and Precision@1 drop queries with R_i = 0 (Musgrave et al. 2020). With an approximate
        searcher also ``'search_recall@10'``: the mean fraction of the exact top 10 that the search
        returns, over a seeded sample of 500 queries.
    """
    leave_one_out = gallery_emb is None
    if leave_one_out != (gallery_labels is None):
        raise ValueError('retrieval_metrics: give both gallery_emb and gallery_labels, or '
                         'neither (leave-one-out).')
    query_labels, gallery_labels = label_codes(
        query_labels, gallery_labels, _num_rows(query_emb, 'query_emb'),
        None if leave_one_out else _num_rows(gallery_emb, 'gallery_emb'))
    if len(query_labels) == 0:
        raise ValueError('retrieval_metrics: no queries; expected at least one.')
    if leave_one_out:
        gallery_emb, gallery_labels = query_emb, query_labels
    else:
        if len(gallery_labels) == 0:
            raise ValueError('retrieval_metrics: the gallery is empty; expected at least '
                             'one item.')
    ks = tuple(dict.fromkeys(check_positive_ints(ks, 'ks')))
    if not ks and not map_at_r:
        raise ValueError('retrieval_metrics: nothing to compute (ks is empty and '
                         'map_at_r=False).')
    searcher = build_searcher(searcher, 'searcher')
    query_t, gallery_t = prepare_pair(query_emb, gallery_emb, normalize,
                                      ('query_emb', 'gallery_emb'))
    first_hit, per_query, search_recall = _search(searcher, query_t, gallery_t, query_labels,
                                                  gallery_labels, ks, map_at_r, leave_one_out)
    metrics = {f'recall@{k}': v for k, v in recall_from_first_hit(first_hit, ks).items()}
    if map_at_r:
        metrics.update(map_at_r_means(*per_query))
    if search_recall is not None:
        metrics[f'search_recall@{SEARCH_RECALL_K}'] = search_recall
    return metrics


def _search(searcher: Searcher, query_t: torch.Tensor, gallery_t: torch.Tensor,
            query_labels: np.ndarray, gallery_labels: np.ndarray, ks: tuple, map_at_r: bool,
            leave_one_out: bool):
    """(first_hit, (ap, rp, p1), search recall or None): per-query scalars of one search."""
    nq, n = query_t.shape[0], gallery_t.shape[0]
    available = n - int(leave_one_out)
    if available == 0:
        raise ValueError('retrieval_metrics: leave-one-out on a single item leaves no '
                         'neighbour to search.')
    # Labels as integer codes, so that relevance is one comparison on any device.
    codes = np.unique(np.concatenate([query_labels, gallery_labels]), return_inverse=True)[1]
    query_codes, gallery_codes = codes[:nq], codes[nq:] if not leave_one_out else codes[:nq]
    num_relevant = count_relevant(query_labels, gallery_labels, leave_one_out)
    # The gallery sorted by label: the positives of a query are one slice of it.
    by_code = np.argsort(gallery_codes, kind='stable')
    sorted_codes = gallery_codes[by_code]
    k = _depth(searcher, ks, map_at_r, int(num_relevant.max()), available)
    self_ids = np.arange(nq) if leave_one_out else None
    # The queries whose top 10 is compared with the exact one.
    sample = None if searcher.exact else np.sort(np.random.default_rng(0).choice(
        nq, min(nq, SEARCH_RECALL_QUERIES), replace=False))
    found = []
    first_hit = np.full(nq, np.inf)
    ap, rp, p1 = (np.full(nq, np.nan) for _ in range(3))
    for block in searcher.search(query_t, gallery_t, k, self_ids):
        start, stop = block.start, block.start + len(block.ids)
        idx = block.ids.cpu().numpy()
        # -1: a neighbour an approximate index did not return.
        relevant = (gallery_codes[idx] == query_codes[start:stop, None]) & (idx >= 0)
        first_hit[start:stop] = first_hit_ranks(relevant)
        if block.similarities is not None:
            # First correct item below the selected top: its rank is counted.
            missed = np.flatnonzero(np.isinf(first_hit[start:stop])
                                    & (num_relevant[start:stop] > 0))
            if len(missed):
                first_hit[start + missed] = _best_positive_rank(
                    block.similarities, missed, query_codes[start + missed], by_code,
                    sorted_codes)
        if map_at_r:
            ap[start:stop], rp[start:stop], p1[start:stop] = map_at_r_per_query(
                relevant, num_relevant[start:stop])
        if sample is not None:
            rows = sample[(sample >= start) & (sample < stop)]
            found.append(idx[rows - start, :SEARCH_RECALL_K])
    search_recall = None if sample is None else _search_recall(
        query_t, gallery_t, sample, np.concatenate(found), leave_one_out, searcher.device)
    return first_hit, (ap, rp, p1), search_recall


def _depth(searcher: Searcher, ks: tuple, map_at_r: bool, max_r: int, available: int) -> int:
    """The k to search: the top max R for MAP@R; for Recall@K the top max K, or with an
    exhaustive searcher, which lets the rank of a first correct item below the top be
    counted, only up to max R; 10 more for the search recall of an approximate one."""
    if searcher.exhaustive:
        need = (max_r, ) if map_at_r else (min(max(ks), max_r), )
    else:
        need = ks + ((max_r, ) if map_at_r else ())
    if not searcher.exact:
        need += (SEARCH_RECALL_K, )
    return max(1, min(max(need), available))


def _search_recall(query_t: torch.Tensor, gallery_t: torch.Tensor, sample: np.ndarray,
                   found: np.ndarray, leave_one_out: bool, device) -> float:
    """Mean fraction of the exact top k of the ``sample`` queries among ``found``
    (len(sample) x k gallery indices, -1 for none)."""
    k = found.shape[1]
    hits = 0
    for block in ExactSearcher(device=device).search(query_t[sample], gallery_t, k,
                                                     sample if leave_one_out else None):
        exact = block.ids.cpu().numpy()
        hits += sum(len(np.intersect1d(e, f))
                    for e, f in zip(exact, found[block.start:block.start + len(exact)]))
    return hits / (len(sample) * k)


def _positive_items(codes: np.ndarray, by_code: np.ndarray,
                    sorted_codes: np.ndarray) -> np.ndarray:
    """Gallery indices of each code's items (rows x max count, -1 past a row's count),
    from the gallery sorted by label (``by_code``, ``sorted_codes``)."""
    lo = np.searchsorted(sorted_codes, codes, side='left')
    count = np.searchsorted(sorted_codes, codes, side='right') - lo
    offsets = np.arange(int(count.max()))
    valid = offsets < count[:, None]
    return np.where(valid, by_code[np.where(valid, lo[:, None] + offsets, lo[:, None])], -1)


def _best_positive_rank(sims: torch.Tensor, rows: np.ndarray, codes: np.ndarray,
                        by_code: np.ndarray, sorted_codes: np.ndarray) -> np.ndarray:
    """Rank of the first correct item of some rows of a similarity block, by counting.

    The first correct item is the positive of highest similarity (the lowest column among
    equals); its positives are gathered from the gallery sorted by label (``by_code``,
    ``sorted_codes``), so only the count touches whole rows.
    """
    items = _positive_items(codes, by_code, sorted_codes)
    valid = items >= 0
    device = sims.device
    rows_t = torch.from_numpy(rows).to(device)
    columns_t = torch.from_numpy(np.where(valid, items, 0)).to(device)
    values = sims[rows_t[:, None], columns_t]
    values[~torch.from_numpy(valid).to(device)] = float('-inf')
    best = values.amax(dim=1)
    at_best = values == best[:, None]
    first = torch.where(at_best, columns_t, torch.full_like(columns_t, sims.shape[1])).amin(1)
    # A few rows at a time, so that the copies and masks stay a small fraction of the block.
    ranks = [rank_of(sims[rows_t[g:g + _COUNT_ROWS]], best[g:g + _COUNT_ROWS],
                     first[g:g + _COUNT_ROWS]) for g in range(0, len(rows_t), _COUNT_ROWS)]
    return torch.cat(ranks).cpu().numpy() if ranks else np.zeros(0, dtype=np.int64)


def recall_at_k(query_emb,
                query_labels,
                gallery_emb=None,
                gallery_labels=None,
                ks: Iterable[int] = (1, ),
                searcher: SearcherSetting = None,
                normalize: bool = True) -> Dict[int, float]:
    """{K: Recall@K in [0, 1]} (Song et al. 2016 / Jégou et al.); arguments as
    :func:`retrieval_metrics` (no gallery: leave-one-out)."""
    ks = tuple(ks)
    metrics = retrieval_metrics(query_emb, query_labels, gallery_emb, gallery_labels,
                                ks=ks, map_at_r=False, searcher=searcher, normalize=normalize)
    return {int(k): metrics[f'recall@{k}'] for k in ks}


def map_at_r(emb: ArrayLike, labels, gallery_emb=None, gallery_labels=None,
             searcher: SearcherSetting = None, normalize: bool = True) -> Dict[str, float]:
    """{'map@r', 'r_precision', 'precision@1'} of a labelled set (Musgrave et al. 2020), each
    in [0, 1]; arguments as :func:`retrieval_metrics` (no gallery: leave-one-out)."""
    return retrieval_metrics(emb, labels, gallery_emb, gallery_labels, ks=(), map_at_r=True,
                             searcher=searcher, normalize=normalize)


def _num_rows(emb, name: str) -> int:
    if not isinstance(emb, (np.ndarray, torch.Tensor)) or emb.ndim != 2:
        raise ValueError(f'retrieval_metrics: {name} must be a 2-D numpy array or torch '
                         f'tensor (items x dimension), got {type(emb).__name__} '
                         f'{tuple(getattr(emb, "shape", ()))}.')
    return emb.shape[0]
