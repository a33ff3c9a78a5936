"""Recall@K and MAP@R of a labelled test set, as an MMEngine metric."""
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
from mmengine.dist import broadcast_object_list, is_main_process
from mmengine.evaluator import BaseMetric

from irtbox.registry import METRICS
from ..functional import retrieval_metrics
from .gather import gather_by_sample_idx, merge_by_sample_idx, pack_results

_SEARCH_KEYS = ('backend', 'chunk_size', 'device', 'normalize')
# A repeated sample index must repeat these (else two samples share an index).
_CONSISTENT = {'label': 'labels'}
# Who sets each per-sample field, for the error when one is missing.
_FIELD_SOURCE = {
    'embedding': "set by the retriever in mode='predict'",
    'gt_label': "set from the dataset's gt_label by the packing transform",
    'sample_idx': 'set by the dataset (MMEngine BaseDataset adds it to every sample)',
}


@METRICS.register_module()
class RetrievalMetric(BaseMetric):
    """Recall@K, MAP@R, R-precision and Precision@1 from one exact k-NN search.

    Each data sample carries ``embedding`` (D), ``gt_label`` (a 0-d or
    1-element label), meta ``sample_idx`` and optionally ``is_query``.
    Embeddings from all ranks are gathered and ordered by ``sample_idx``;
    repeats of a ``sample_idx`` (the padding that MMEngine's DefaultSampler
    adds in distributed runs) are dropped. Rank 0 computes, with cosine
    similarity (:func:`~irtbox.evaluation.functional.retrieval_metrics`):

    - leave-one-out when no sample has ``is_query=True``: every sample queries
      all the others, itself excluded by index (SOP, CUB-200, Cars196);
    - query/gallery otherwise: samples with ``is_query=True`` are searched in
      the other samples only (In-Shop).

    Metrics, all fractions in [0, 1] (not percentages):
    ``recall@K`` for each K = fraction of queries with a same-label item in
    their K nearest neighbours (Song et al., CVPR 2016; every query counts);
    ``map@r`` = mean over queries of (1/R) Σ_{j≤R} rel_j·P@j, ``r_precision``
    = mean of (Σ_{j≤R} rel_j)/R and ``precision@1`` = mean of rel_1, with R the
    number of same-label gallery items (Musgrave et al., ECCV 2020, Sec. 3.2;
    queries with R = 0 are dropped from these three). Names get ``prefix/``
    in front when ``prefix`` is set.

    After :meth:`evaluate`, ``self.last_outputs`` holds (on rank 0; ``None``
    on other ranks) the gathered, de-duplicated data as numpy arrays ordered
    by sample index: ``embeddings`` (n x D float32), ``labels`` (n),
    ``sample_idx`` (n int64) and ``is_query`` (n bool), e.g. for
    ``tools/test.py --out``.

    Args:
        ks: the K of Recall@K.
        map_at_r: also compute MAP@R, R-precision and Precision@1 (the search
            then returns max(R) neighbours per query).
        search: keyword arguments of
            :func:`~irtbox.evaluation.functional.knn`: ``backend`` ('torch' or
            'faiss'), ``chunk_size``, ``device``, ``normalize``.
        prefix: prepended to the metric names as ``prefix/name``.
        collect_device: 'cpu' or 'gpu', how results are gathered across ranks.
        collect_dir: shared folder for gathering on 'cpu' (default: a
            temporary one).
    """

    default_prefix: Optional[str] = None

    def __init__(self,
                 ks: Sequence[int] = (1, 2, 4, 8),
                 map_at_r: bool = True,
                 search: Optional[dict] = None,
                 prefix: Optional[str] = None,
                 collect_device: str = 'cpu',
                 collect_dir: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix, collect_dir=collect_dir)
        ks = (ks, ) if isinstance(ks, int) else tuple(ks)
        for k in ks:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                raise ValueError(f'RetrievalMetric: ks must hold positive integers, got '
                                 f'{k!r} in ks={ks}.')
        if not ks and not map_at_r:
            raise ValueError('RetrievalMetric: nothing to compute (ks is empty and '
                             'map_at_r=False).')
        search = {'backend': 'torch', 'chunk_size': 1024, **(search or {})}
        for key in search:
            if key not in _SEARCH_KEYS:
                raise ValueError(f'RetrievalMetric: unknown key {key!r} in search; '
                                 f'expected some of {_SEARCH_KEYS}.')
        self.ks = ks
        self.map_at_r = bool(map_at_r)
        self.search = search
        self.last_outputs: Optional[Dict[str, np.ndarray]] = None

    def process(self, data_batch: Any, data_samples: Sequence) -> None:
        """Store each sample's embedding, label, index and query flag (CPU numpy).

        ``data_samples``: the model's predict output, as :class:`DataSample`
        objects or the dicts that MMEngine's Evaluator makes of them.
        """
        for sample in data_samples:
            embedding = _field(sample, 'embedding')
            embedding = (embedding.detach().float().cpu().numpy() if isinstance(
                embedding, torch.Tensor) else np.asarray(embedding, dtype=np.float32))
            label = _field(sample, 'gt_label')
            label = np.asarray(label.cpu() if isinstance(label, torch.Tensor) else label)
            if label.size != 1:
                raise ValueError(f'RetrievalMetric.process: gt_label must hold one label, '
                                 f'got shape {label.shape} (sample_idx '
                                 f"{sample.get('sample_idx')}).")
            self.results.append(
                dict(embedding=embedding.reshape(-1),
                     label=label.reshape(()),
                     sample_idx=int(_field(sample, 'sample_idx')),
                     is_query=bool(sample.get('is_query'))))

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """Metrics of per-sample results as stored by :meth:`process` (one process)."""
        return self._compute(
            merge_by_sample_idx([pack_results(results)], None, 'RetrievalMetric', _CONSISTENT))

    def evaluate(self, size: int) -> Dict[str, float]:
        """Gather every rank's results by sample index, compute on rank 0, broadcast.

        Unlike BaseMetric, padding is not dropped by cutting the gathered list
        at ``size`` (which relies on the sampler's order) but by removing
        repeated sample indices.
        """
        data = gather_by_sample_idx(self.results, size, 'RetrievalMetric', self.collect_device,
                                    self.collect_dir, _CONSISTENT)
        self.results.clear()
        if is_main_process():
            metrics = self._compute(data)
            if self.prefix:
                metrics = {f'{self.prefix}/{k}': v for k, v in metrics.items()}
            out = [metrics]
        else:
            self.last_outputs = None
            out = [None]
        broadcast_object_list(out)
        return out[0]

    def _compute(self, data: Dict[str, np.ndarray]) -> Dict[str, float]:
        data = dict(embeddings=data['embedding'], labels=data['label'],
                    sample_idx=data['sample_idx'], is_query=data['is_query'])
        self.last_outputs = data
        emb, labels, is_query = data['embeddings'], data['labels'], data['is_query']
        if is_query.any():
            if is_query.all():
                raise ValueError('RetrievalMetric: every sample has is_query=True, so the '
                                 'gallery is empty; mark the gallery samples is_query=False.')
            gallery = ~is_query
            return retrieval_metrics(emb[is_query], labels[is_query], emb[gallery],
                                     labels[gallery], ks=self.ks, map_at_r=self.map_at_r,
                                     **self.search)
        return retrieval_metrics(emb, labels, ks=self.ks, map_at_r=self.map_at_r,
                                 **self.search)


def _field(sample, key: str):
    value = sample.get(key)
    if value is None:
        keys = getattr(sample, 'all_keys', sample.keys)
        raise KeyError(f'RetrievalMetric.process: a data sample has no {key!r} '
                       f'({_FIELD_SOURCE[key]}); it has {sorted(keys())}.')
    return value
