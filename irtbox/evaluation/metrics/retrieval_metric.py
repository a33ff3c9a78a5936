"""Recall@K, MAP@R and mAP of a labelled test set, as an MMEngine metric."""
import dataclasses
import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.logging import print_log

from irtbox.registry import METRICS
from irtbox.utils.checks import check_positive_ints
from irtbox.utils.dist import resolve_device
from irtbox.utils.errors import with_prefix
from ..functional import retrieval_metrics, search_average_precision
from ..neighbours import Searcher, build_searcher
from .gather import GatheredMetric, check_finite_embeddings, embedding_to_numpy
from .resources import rank_threads

__all__ = ['RetrievalMetric']


@METRICS.register_module()
class RetrievalMetric(GatheredMetric):
    """Recall@K, MAP@R, R-precision and Precision@1 from one k-NN search (exact by default), and
    optionally mAP over the full ranking with junk ignored.

    Each data sample carries ``embedding`` (D), ``gt_label``, meta ``sample_idx`` and
    optionally ``is_query``. Embeddings from all ranks are gathered and ordered by
    ``sample_idx``; repeats (the DefaultSampler's padding) are dropped. Rank 0 computes
    (:func:`~irtbox.evaluation.functional.retrieval_metrics`):

    - leave-one-out when no sample has ``is_query=True``: every sample queries all the others,
      itself excluded by index (SOP, CUB-200, Cars196);
    - query/gallery otherwise: the ``is_query=True`` samples search the others only (In-Shop).

    Metrics in percent (docs/protocols.md defines them): ``recall@K`` (hit rate, every query
    counts); ``map@r``, ``r_precision``, ``precision@1`` as in
    :func:`~irtbox.evaluation.functional.map_at_r.map_at_r_per_query`; with ``map_at_all=True``
    ``map@all``, the AP over the whole gallery ranking
    (:func:`~irtbox.evaluation.functional.search_average_precision`, exact whatever the searcher,
    memory O(chunk_size x gallery)) with junk removed: ``dataset_meta['junk']``,
    ``{query sample_idx: [gallery sample_idx, ...]}`` (from :class:`~irtbox.datasets.CSVDataset`'s
    ``junk_file``), plus the query itself in leave-one-out.

    Rank 0 computes with torch's threads set to its share of the node's cores (torchrun
    leaves each rank one: :func:`~irtbox.evaluation.metrics.resources.rank_threads`).

    After :meth:`evaluate`, ``self.last_outputs`` holds on rank 0 (``None`` elsewhere) the
    gathered data ordered by sample index: ``embeddings`` (n x D float32), ``labels`` (n),
    ``sample_idx`` (n int64), ``is_query`` (n bool) and, with ``map_at_all``, ``ap_all``.

    Args:
        ks: the K of Recall@K.
        map_at_r: also compute MAP@R, R-precision and Precision@1 (the search then selects max(R)
            neighbours per query).
        map_at_all: also compute ``map@all`` (see above).
        search: the searcher (:mod:`irtbox.evaluation.neighbours`), config or instance;
            ``None``: ``dict(type='ExactSearcher')``. An approximate faiss one adds
            ``search_recall@10``. Device unset: ExactSearcher on this rank's GPU if any,
            FaissSearcher on the CPU.
        normalize: L2-normalise the embeddings before searching (cosine similarity).
        prefix: prepended to the metric names as ``prefix/name``.
    """

    # A repeated sample index must repeat these (else two samples share an index).
    consistent = {'label': 'labels'}
    field_source = dict(GatheredMetric.field_source,
                        gt_label="set from the dataset's gt_label by the packing transform")

    def __init__(self,
                 ks: Sequence[int] = (1, 2, 4, 8),
                 map_at_r: bool = True,
                 map_at_all: bool = False,
                 search: Union[None, dict, Searcher] = None,
                 normalize: bool = True,
                 prefix: Optional[str] = None) -> None:
        super().__init__(prefix=prefix)
        try:
            ks = check_positive_ints(ks, 'ks')
            if not ks and not map_at_r and not map_at_all:
                raise ValueError('nothing to compute (ks is empty and '
                                 'map_at_r=map_at_all=False).')
            self.searcher = build_searcher(search)
        except ValueError as err:  # ConfigError included: the message names this metric
            raise with_prefix(err, type(self).__name__) from err
        self.normalize = bool(normalize)
        self.ks = ks
        self.map_at_r = bool(map_at_r)
        self.map_at_all = bool(map_at_all)

    def process(self, data_batch: Any, data_samples: Sequence) -> None:
        """Store each sample's embedding, label, index and query flag (CPU numpy)."""
        for sample in data_samples:
            embedding = embedding_to_numpy(self._field(sample, 'embedding'))
            label = self._field(sample, 'gt_label')
            label = np.asarray(label.cpu() if isinstance(label, torch.Tensor) else label)
            if label.size != 1:
                raise ValueError(f'RetrievalMetric.process: gt_label must hold one label, '
                                 f'got shape {label.shape} (sample_idx '
                                 f"{sample.get('sample_idx')}).")
            self.results.append(
                dict(embedding=embedding,
                     label=label.reshape(()),
                     sample_idx=int(self._field(sample, 'sample_idx')),
                     is_query=bool(sample.get('is_query'))))

    @rank_threads()
    def _compute(self, data: Dict[str, np.ndarray]) -> Dict[str, float]:
        data = dict(embeddings=data['embedding'], labels=data['label'],
                    sample_idx=data['sample_idx'], is_query=data['is_query'])
        check_finite_embeddings(data['embeddings'], data['sample_idx'], 'RetrievalMetric')
        warn_tied_embeddings(data['embeddings'])
        self.last_outputs = data
        emb, labels, is_query = data['embeddings'], data['labels'], data['is_query']
        if is_query.all():
            raise ValueError('RetrievalMetric: every sample has is_query=True, so the '
                             'gallery is empty; mark the gallery samples is_query=False.')
        metrics = {}
        if self.ks or self.map_at_r:
            split = ((emb[is_query], labels[is_query], emb[~is_query], labels[~is_query])
                     if is_query.any() else (emb, labels))  # else leave-one-out
            metrics = retrieval_metrics(*split, ks=self.ks, map_at_r=self.map_at_r,
                                        searcher=self._rank_searcher(), normalize=self.normalize)
        if self.map_at_all:
            aps = self._average_precisions(data)
            data['ap_all'] = 100 * aps
            metrics['map@all'] = float(np.nanmean(aps)) if not np.isnan(aps).all() \
                else float('nan')
        return {key: 100 * value for key, value in metrics.items()}

    def _rank_searcher(self) -> Searcher:
        """The searcher on this rank's device (:func:`~irtbox.utils.dist.resolve_device`);
        unconfigured, faiss keeps the CPU (faiss-cpu would warn and fall back every time)."""
        searcher = self.searcher
        if searcher.device is None and not searcher.gpu_when_available:
            return searcher
        return dataclasses.replace(searcher, device=resolve_device(searcher.device))

    def _average_precisions(self, data: Dict[str, np.ndarray]) -> np.ndarray:
        """AP of every query over its full gallery ranking, junk removed (NaN: no positive)."""
        emb, labels, is_query = data['embeddings'], data['labels'], data['is_query']
        leave_one_out = not is_query.any()
        query = np.ones_like(is_query) if leave_one_out else is_query
        gallery = np.ones_like(is_query) if leave_one_out else ~is_query
        emb = torch.from_numpy(np.ascontiguousarray(emb, dtype=np.float32))
        if self.normalize:
            emb = F.normalize(emb, dim=1)
        q_emb, g_emb = (emb, emb) if leave_one_out else \
            (emb[torch.from_numpy(query)], emb[torch.from_numpy(gallery)])
        q_labels, g_labels = labels[query], labels[gallery]
        junk = _junk_columns(self.dataset_meta, data['sample_idx'], query, gallery)
        # Positives of a label = one slice of the gallery sorted by label.
        by_label = np.argsort(g_labels, kind='stable')
        sorted_labels = g_labels[by_label]
        lo = np.searchsorted(sorted_labels, q_labels, side='left')
        hi = np.searchsorted(sorted_labels, q_labels, side='right')
        gnd = []
        for i in range(len(q_labels)):
            ignored = junk.get(i, [])
            if leave_one_out:  # query i is gallery item i
                ignored = ignored + [i]
            gnd.append(dict(ok=by_label[lo[i]:hi[i]], junk=np.asarray(ignored, np.int64)))
        return search_average_precision(q_emb, g_emb, gnd, self.searcher.chunk_size,
                                        resolve_device(self.searcher.device))


#: Identical embeddings above this share of the samples are said in the log.
TIE_SHARE = 0.1


def warn_tied_embeddings(embeddings: np.ndarray, share: float = TIE_SHARE) -> Optional[str]:
    """Log (and return) a warning when more than ``share`` of the samples have an embedding
    identical to another's: every query scores them equally, ties are ranked by dataset
    order, and the metrics then measure that order (a collapsed model gives one embedding
    for every image)."""
    rows = np.ascontiguousarray(embeddings)
    if rows.ndim != 2 or not len(rows):
        return None
    as_bytes = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    values, counts = np.unique(as_bytes, return_counts=True)
    tied = int(counts[counts > 1].sum())
    if tied <= share * len(rows):
        return None
    message = (f'RetrievalMetric: {tied} of {len(rows)} embeddings ({100 * tied / len(rows):.0f}%) '
               f'are identical to another ({len(values)} distinct): their scores tie and ties are '
               'ranked by dataset order, which the metrics then measure (a collapsed model, '
               'constant outputs?)')
    print_log(message, logger='current', level=logging.WARNING)
    return message


def _junk_columns(dataset_meta: Optional[dict], sample_idx: np.ndarray, query: np.ndarray,
                  gallery: np.ndarray) -> Dict[int, List[int]]:
    """``dataset_meta['junk']`` ({query sample_idx: [gallery sample_idx, ...]}) as
    {query row: [gallery column, ...]} within the evaluated queries and gallery."""
    junk = (dataset_meta or {}).get('junk')
    if junk is None:
        return {}
    if not isinstance(junk, Mapping):
        raise TypeError("RetrievalMetric: dataset_meta['junk'] must be a dict {query "
                        f'sample_idx: [gallery sample_idx, ...]}}, got {type(junk).__name__}.')
    # sample_idx is sorted and unique (merge_by_sample_idx).
    row_of = np.cumsum(query) - 1
    col_of = np.cumsum(gallery) - 1

    def position(idx, mask, what: str, key) -> int:
        if isinstance(idx, (bool, np.bool_)) or not isinstance(idx, (int, np.integer)):
            raise TypeError(f"RetrievalMetric: dataset_meta['junk'][{key!r}]: expected integer "
                            f'sample indices, got {idx!r} ({type(idx).__name__}).')
        pos = int(np.searchsorted(sample_idx, idx))
        if pos == len(sample_idx) or sample_idx[pos] != idx or not mask[pos]:
            raise ValueError(f"RetrievalMetric: dataset_meta['junk'] names sample_idx {idx} "
                             f'as a {what}, but it is not a {what} among the evaluated samples '
                             '(queries: is_query=True; gallery: the others; in leave-one-out '
                             'mode, any sample).')
        return pos

    out = {}
    for key, items in junk.items():
        row = row_of[position(key, query, 'query', key)]
        if isinstance(items, (str, bytes)) or not hasattr(items, '__iter__'):
            raise TypeError(f"RetrievalMetric: dataset_meta['junk'][{key!r}] must be a list of "
                            f'gallery sample indices, got {items!r}.')
        out[int(row)] = [int(col_of[position(g, gallery, 'gallery item', key)]) for g in items]
    return out
