"""Every retrieval metric of a labelled query set from one streamed nearest-neighbour search.

The search core (:mod:`.search`) yields a chunk of queries at a time; each chunk is turned
into per-query scalars (rank of the first correct item, AP@R, R-precision, Precision@1)
and dropped, so the extra memory is one similarity block, whatever the number of queries.
"""
from typing import Dict, Iterable, Optional, Union

import numpy as np
import torch

from .checks import ArrayLike, as_vector
from .inverted_file import InvertedFile, parse_ivf
from .map_at_r import count_relevant, map_at_r_means, map_at_r_per_query
from .recall import first_hit_ranks, recall_from_first_hit
from .search import (approximate_topk_blocks, auto_chunk_size, prepare_pair, rank_of,
                     similarity_blocks, stable_topk, topk_blocks)

__all__ = ['retrieval_metrics', 'recall_at_k', 'map_at_r']

OWNER = 'retrieval_metrics'
# Approximate search is reported with the recall of its top 10 against exact search, on
# a seeded sample of this many queries (5000 neighbours: a standard error of ~0.1 point at
# 99 %; the exact search of the sample is 1 / 120 of an exact evaluation of SOP).
SEARCH_RECALL_K = 10
SEARCH_RECALL_QUERIES = 500
# Rows whose first correct item is counted at once.
_COUNT_ROWS = 64


def retrieval_metrics(query_emb,
                      query_labels,
                      gallery_emb=None,
                      gallery_labels=None,
                      ks: Iterable[int] = (1, ),
                      map_at_r: bool = True,
                      **search) -> Dict[str, float]:
    """Recall@K and MAP@R / R-precision / Precision@1 from ONE exact search.

    Recall@K for every K needs only the rank of each query's first correct
    item, and MAP@R only the top R_i (R_i = number of gallery items with
    query i's label). With the torch backend each chunk's top max(R_i) is
    selected and, for the queries whose first correct item is not in it,
    that item's rank is counted in the similarity block (no sort beyond
    max R). With faiss the top max(max(ks), max R_i) is searched. Ties go to
    the lower gallery index either way, so both give the results of a full
    stable sort.

    Args:
        query_emb: nq x D embeddings (numpy array or torch tensor).
        query_labels: nq labels (numpy array, tensor or list).
        gallery_emb, gallery_labels: N x D and N. Both ``None``:
            leave-one-out, the queries are the gallery and query i is
            excluded from its own search by index (SOP, CUB, Cars protocol).
            Given: queries are searched in this gallery only (In-Shop).
        ks: the K of Recall@K.
        map_at_r: also compute MAP@R, R-precision and Precision@1.
        **search: ``backend`` ('torch' or 'faiss'), ``chunk_size`` (queries
            per similarity block; ``None``: a block of at most 128 MB),
            ``device``, ``normalize`` (as :func:`knn`). Approximate search, for
            galleries too large for exact search:

            - ``index='IVF<nlist>'`` (torch backend): irtbox's inverted file
              (:mod:`.inverted_file`), the gallery split into ``nlist`` cells by
              k-means, each query's candidates the items of its ``nprobe``
              cells of nearest centroid, ranked by exact similarity;
              ``candidates=n`` probes the nearest cells only until they hold
              n items (then ``nprobe`` defaults to nlist). Recall@K beyond the
              top max R is counted among the candidates.
            - ``backend='faiss'`` with ``index`` (any faiss factory string but
              ``'Flat'``, e.g. ``'IVF4096,Flat'``, ``'HNSW32'``) and
              ``nprobe`` / ``ef_search``.

    Returns:
        ``{'recall@K': ...}`` for each K and, with ``map_at_r``, ``'map@r'``,
        ``'r_precision'``, ``'precision@1'``; all fractions in [0, 1].
        Recall@K counts every query; MAP@R, R-precision and Precision@1 drop
        queries with R_i = 0 (Musgrave et al. 2020). With an approximate
        ``index`` also ``'search_recall@10'``: the mean fraction of the exact
        top 10 that the approximate search returns, over a seeded sample of
        500 queries.
    """
    leave_one_out = gallery_emb is None
    if leave_one_out != (gallery_labels is None):
        raise ValueError('retrieval_metrics: give both gallery_emb and gallery_labels, or '
                         'neither (leave-one-out).')
    query_labels = as_vector(query_labels, 'query_labels', OWNER,
                             _num_rows(query_emb, 'query_emb'), entry='label')
    if len(query_labels) == 0:
        raise ValueError('retrieval_metrics: no queries; expected at least one.')
    if leave_one_out:
        gallery_emb, gallery_labels = query_emb, query_labels
    else:
        gallery_labels = as_vector(gallery_labels, 'gallery_labels', OWNER,
                                   _num_rows(gallery_emb, 'gallery_emb'), entry='label')
        if len(gallery_labels) == 0:
            raise ValueError('retrieval_metrics: the gallery is empty; expected at least '
                             'one item.')
    ks = _check_ks(ks)
    if not ks and not map_at_r:
        raise ValueError('retrieval_metrics: nothing to compute (ks is empty and '
                         'map_at_r=False).')
    first_hit, per_query, search_recall = _stream(query_emb, query_labels, gallery_emb,
                                                  gallery_labels, ks, map_at_r, leave_one_out,
                                                  **search)
    metrics = {f'recall@{k}': v for k, v in recall_from_first_hit(first_hit, ks).items()}
    if map_at_r:
        metrics.update(map_at_r_means(*per_query))
    if search_recall is not None:
        metrics[f'search_recall@{SEARCH_RECALL_K}'] = search_recall
    return metrics


def _stream(query_emb, query_labels, gallery_emb, gallery_labels, ks, map_at_r,
            leave_one_out, backend: str = 'torch', chunk_size: Optional[int] = None,
            device: Optional[Union[str, torch.device]] = None, normalize: bool = True,
            index: Optional[str] = None, nprobe: Optional[int] = None,
            ef_search: Optional[int] = None, candidates: Optional[int] = None):
    """(first_hit, (ap, rp, p1), search recall or None): per-query scalars of one search."""
    if backend not in ('torch', 'faiss'):
        raise ValueError(f"retrieval_metrics: backend must be 'torch' or 'faiss', got "
                         f'{backend!r}.')
    approximate = index is not None and index != 'Flat'
    if approximate and backend == 'torch':
        nlist = parse_ivf(index, OWNER)
        if ef_search is not None:
            raise ValueError("retrieval_metrics: ef_search is a parameter of faiss's HNSW; "
                             "backend='torch' searches index='IVF<nlist>' with nprobe.")
        if candidates is not None and (isinstance(candidates, bool) or not isinstance(
                candidates, (int, np.integer)) or candidates < 1):
            raise ValueError(f'retrieval_metrics: candidates must be a positive integer (the '
                             f'items each query searches), got {candidates!r}.')
        if nprobe is None and candidates is not None:
            nprobe = nlist
        if isinstance(nprobe, bool) or not isinstance(nprobe, (int, np.integer)) \
                or not 1 <= nprobe <= nlist:
            raise ValueError(f'retrieval_metrics: index={index!r} needs nprobe (the cells '
                             f'searched per query, an integer in 1..{nlist}) or candidates; '
                             f'got nprobe={nprobe!r}.')
    elif candidates is not None:
        raise ValueError("retrieval_metrics: candidates is a parameter of backend='torch' "
                         "with index='IVF<nlist>'.")
    query_t, gallery_t = prepare_pair(query_emb, gallery_emb, OWNER, normalize,
                                      ('query_emb', 'gallery_emb'))
    nq, n = query_t.shape[0], gallery_t.shape[0]
    requested_chunk = chunk_size
    chunk_size = auto_chunk_size(chunk_size, n, OWNER)
    available = n - int(leave_one_out)
    if available == 0:
        raise ValueError('retrieval_metrics: leave-one-out on a single item leaves no '
                         'neighbour to search.')
    # Labels as integer codes, so that relevance is one comparison on any device.
    codes = np.unique(np.concatenate([query_labels, gallery_labels]), return_inverse=True)[1]
    query_codes, gallery_codes = codes[:nq], codes[nq:] if not leave_one_out else codes[:nq]
    num_relevant = count_relevant(query_labels, gallery_labels, leave_one_out)
    max_r = int(num_relevant.max())
    # The gallery sorted by label: the positives of a query are one slice of it.
    by_code = np.argsort(gallery_codes, kind='stable')
    sorted_codes = gallery_codes[by_code]
    first_hit = np.full(nq, np.inf)
    ap, rp, p1 = (np.full(nq, np.nan) for _ in range(3))

    def consume(start, idx, sims=None):
        stop = start + len(idx)
        idx = idx.cpu().numpy()
        # -1: a neighbour an approximate index did not return.
        relevant = (gallery_codes[idx] == query_codes[start:stop, None]) & (idx >= 0)
        first_hit[start:stop] = first_hit_ranks(relevant)
        if sims is not None:
            # First correct item below the selected top: its rank is counted.
            missed = np.flatnonzero(np.isinf(first_hit[start:stop])
                                    & (num_relevant[start:stop] > 0))
            if len(missed):
                first_hit[start + missed] = _best_positive_rank(
                    sims, missed, query_codes[start + missed], by_code, sorted_codes)
        if map_at_r:
            ap[start:stop], rp[start:stop], p1[start:stop] = map_at_r_per_query(
                relevant, num_relevant[start:stop])

    search_recall = None
    if approximate:
        # The queries whose approximate top 10 is compared with the exact one.
        sample = np.sort(np.random.default_rng(0).choice(
            nq, min(nq, SEARCH_RECALL_QUERIES), replace=False))
        found = []

        def keep_sample(start, idx):
            rows = sample[(sample >= start) & (sample < start + len(idx))]
            found.append(idx[torch.from_numpy(rows - start).to(idx.device),
                             :SEARCH_RECALL_K].cpu().numpy())
    if approximate and backend == 'torch':
        device = torch.device(device) if device is not None else query_t.device
        query_t, gallery_t = query_t.to(device), gallery_t.to(device)
        inverted = InvertedFile.build(gallery_t, nlist, keep_nearest=InvertedFile.probe_width(
            nlist, n, nprobe, candidates) if leave_one_out else 0)
        # The top max R (at least the 10 of the search recall); Recall@K beyond it is
        # counted among the candidates, not sorted.
        k = min(max(max_r if map_at_r else 1, SEARCH_RECALL_K), available)
        for block in inverted.search(
                query_t, int(nprobe),
                inverted.auto_chunk_size(requested_chunk, nprobe, candidates, OWNER),
                leave_one_out, candidates):
            start, idx = block.start, block.topk(k)[1]
            consume(start, idx)
            missed = np.flatnonzero(np.isinf(first_hit[start:start + len(idx)])
                                    & (num_relevant[start:start + len(idx)] > 0))
            if len(missed):
                first_hit[start + missed] = _best_candidate_rank(
                    block, missed, query_codes[start + missed], by_code, sorted_codes)
            keep_sample(start, idx)
    elif approximate:
        k = min(max(ks + ((max_r, ) if map_at_r else ()) + (SEARCH_RECALL_K, )), available)
        for start, _, idx in approximate_topk_blocks(query_t, gallery_t, k, chunk_size, index,
                                                     nprobe, ef_search, leave_one_out):
            consume(start, idx)
            keep_sample(start, idx)
    elif backend == 'faiss':
        k = min(max(ks + ((max_r, ) if map_at_r else ()) + (1, )), available)
        for start, _, idx in topk_blocks(query_t, gallery_t, k, chunk_size, 'faiss', device,
                                         leave_one_out):
            consume(start, idx)
    else:
        # Only the top max R is selected; Recall@K beyond it is counted, not sorted.
        k = max(1, min(max_r if map_at_r else min(max(ks), max_r), available))
        for start, sims in similarity_blocks(query_t, gallery_t, chunk_size, device,
                                             leave_one_out):
            consume(start, stable_topk(sims, k)[1], sims)
    if approximate:
        search_recall = _search_recall(query_t, gallery_t, sample, np.concatenate(found),
                                       leave_one_out, chunk_size)
    return first_hit, (ap, rp, p1), search_recall


def _search_recall(query_t, gallery_t, sample, found, leave_one_out, chunk_size) -> float:
    """Mean fraction of the exact top 10 of the ``sample`` queries among ``found``."""
    k = found.shape[1]
    hits = 0
    for start, sims in similarity_blocks(query_t[sample], gallery_t, chunk_size):
        rows = np.arange(start, start + len(sims))
        if leave_one_out:
            sims[torch.from_numpy(rows - start), torch.from_numpy(sample[rows])] = float('-inf')
        exact = stable_topk(sims, k)[1].cpu().numpy()
        hits += sum(len(np.intersect1d(e, f)) for e, f in zip(exact, found[rows]))
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


def _best_candidate_rank(block, rows: np.ndarray, codes: np.ndarray, by_code: np.ndarray,
                         sorted_codes: np.ndarray) -> np.ndarray:
    """Rank of the first correct item among the candidates of some rows of an inverted-file
    block, by counting (``inf`` where no candidate is correct).

    The first correct item is the candidate positive of highest similarity (the lowest
    gallery index among equals); the positives are looked up where they sit in the block,
    and :func:`rank_of` counts the candidates above it, equal ones by gallery index.
    """
    device = block.sims.device
    rows_t = torch.from_numpy(rows).to(device)
    items = torch.from_numpy(_positive_items(codes, by_code, sorted_codes)).to(device)
    columns = block.columns(rows_t, items)
    values = block.sims[rows_t[:, None], columns.clamp(min=0)]
    values[columns < 0] = float('-inf')
    best = values.amax(dim=1)
    first = torch.where(values == best[:, None], items,
                        torch.full_like(items, torch.iinfo(items.dtype).max)).amin(dim=1)
    ranks = torch.full((len(rows), ), float('inf'), dtype=torch.float64, device=device)
    found = torch.isfinite(best).nonzero().squeeze(1)
    ranks[found] = _count_ranks(block.sims, rows_t[found], best[found], first[found],
                                block.row_ids).double()
    return ranks.cpu().numpy()


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
    return _count_ranks(sims, rows_t, best, first).cpu().numpy()


def _count_ranks(sims: torch.Tensor, rows: torch.Tensor, value: torch.Tensor,
                 key: torch.Tensor, keys_of=None) -> torch.Tensor:
    """:func:`rank_of` on ``rows`` of ``sims``, a few rows at a time, so that the copies and
    masks stay a small fraction of the block. ``keys_of`` takes row numbers of ``sims``."""
    ranks = []
    for g in range(0, len(rows), _COUNT_ROWS):
        part = rows[g:g + _COUNT_ROWS]
        ranks.append(rank_of(sims[part], value[g:g + _COUNT_ROWS], key[g:g + _COUNT_ROWS],
                             None if keys_of is None else
                             (lambda tied, part=part: keys_of(part[tied]))))
    return torch.cat(ranks) if ranks else torch.zeros(0, dtype=torch.long, device=sims.device)


def recall_at_k(query_emb,
                query_labels,
                gallery_emb=None,
                gallery_labels=None,
                ks: Iterable[int] = (1, ),
                **search) -> Dict[int, float]:
    """Recall@K of queries searched in a gallery (Recall@K of Song et al. 2016 / Jégou et al.).

    Args:
        query_emb: nq x D embeddings (numpy array or torch tensor).
        query_labels: nq labels.
        gallery_emb, gallery_labels: N x D and N; ``None`` = leave-one-out on
            the queries themselves (query i excluded from its own search by
            index).
        ks: the values of K.
        **search: as :func:`retrieval_metrics` (``backend``, ``chunk_size``,
            ``device``, ``normalize``).

    Returns:
        {K: recall@K in [0, 1]}.
    """
    ks = tuple(ks)
    metrics = retrieval_metrics(query_emb, query_labels, gallery_emb, gallery_labels,
                                ks=ks, map_at_r=False, **search)
    return {int(k): metrics[f'recall@{k}'] for k in ks}


def map_at_r(emb: ArrayLike, labels, gallery_emb=None, gallery_labels=None,
             **search) -> Dict[str, float]:
    """MAP@R, R-precision and Precision@1 of a labelled set (Musgrave et al. 2020).

    Args:
        emb: n x D embeddings (numpy array or torch tensor).
        labels: n labels.
        gallery_emb, gallery_labels: optional separate gallery (N x D, N);
            ``None`` = leave-one-out on ``emb`` (each item excluded from its
            own search by index).
        **search: as :func:`retrieval_metrics`.

    Returns:
        {'map@r', 'r_precision', 'precision@1'}, each in [0, 1].
    """
    return retrieval_metrics(emb, labels, gallery_emb, gallery_labels, ks=(), map_at_r=True,
                             **search)


def _num_rows(emb, name: str) -> int:
    if not isinstance(emb, (np.ndarray, torch.Tensor)) or emb.ndim != 2:
        raise ValueError(f'retrieval_metrics: {name} must be a 2-D numpy array or torch '
                         f'tensor (items x dimension), got {type(emb).__name__} '
                         f'{tuple(getattr(emb, "shape", ()))}.')
    return emb.shape[0]


def _check_ks(ks) -> tuple:
    ks = (ks, ) if isinstance(ks, (int, np.integer)) else tuple(ks)
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f'retrieval_metrics: every K in ks must be a positive '
                             f'integer, got {k!r} in {ks}.')
    return tuple(dict.fromkeys(int(k) for k in ks))
