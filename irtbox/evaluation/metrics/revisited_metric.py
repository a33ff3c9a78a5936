"""mAP and mP@k of the revisited Oxford / Paris benchmarks, as an MMEngine metric."""
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import torch

from irtbox.registry import METRICS
from irtbox.utils.checks import check_positive_int, check_positive_ints
from irtbox.utils.dist import resolve_device
from ..functional.reranking import alpha_database_augmentation, alpha_query_expansion
from ..functional.rerankers import check_rerank_cfg, rerank_search
from ..functional.revisited import PROTOCOLS, build_revisited_gnd, revisited_metrics
from .gather import GatheredMetric, check_finite_embeddings, embedding_to_numpy
from .resources import rank_threads

__all__ = ['RevisitedMetric']

_SHORT = {'easy': 'E', 'medium': 'M', 'hard': 'H'}
_RERANK_KEYS = ('k', 'alpha')


@METRICS.register_module()
class RevisitedMetric(GatheredMetric):
    """mAP and mP@k under the Easy / Medium / Hard protocols of ROxford5k / RParis6k.

    Radenović et al., CVPR 2018; definitions in docs/protocols.md, "Revisited Oxford and Paris".
    Samples carry ``embedding`` (D), meta ``sample_idx`` and ``is_query``, gathered from all
    ranks in ``sample_idx`` order: queries in ``qimlist`` order, the database ``imlist`` then any
    R1M distractors. Ground truth: ``dataset_meta['gnd']``, scored by
    :func:`~irtbox.evaluation.functional.revisited_metrics`, after optional αDBA then αQE
    (:mod:`irtbox.evaluation.functional.reranking`) then a re-ranking of each query's shortlist
    (:mod:`irtbox.evaluation.functional.rerankers`; the rest of the database follows it).

    Outputs ×100: ``<name>/mAP_E`` ... ``<name>/mP@k_H`` for each k of ``kappas``; ``<name>`` is
    ``prefix``, else ``dataset_meta['dataset_name']``, else nothing. ``self.last_outputs`` (rank
    0) holds ``embeddings`` (n x D, before post-processing), ``sample_idx``, ``is_query`` and
    ``ap_E`` / ``ap_M`` / ``ap_H`` (per query ×100, NaN without positives).

    Args:
        query_expansion: ``None`` or ``dict(k=..., alpha=...)`` for αQE.
        database_augmentation: ``None`` or ``dict(k=..., alpha=...)`` for αDBA.
        rerank: ``None`` or a re-ranker, e.g. ``dict(type='superglobal')``, ``dict(type=
            'kreciprocal', k1=20)``, ``dict(type='diffusion', shortlist=1000)``
            (docs/methods/reranking.md).
        chunk_size: queries per similarity block (memory O(chunk_size x n_db); ``None``: a block of
            at most 512 MB), also the chunk of the αQE / αDBA searches (``None``: at most 128 MB).
        device: where similarities are computed (default: this rank's own GPU, else the CPU;
            :mod:`irtbox.evaluation.metrics.resources`).
        prefix: replaces the dataset name in the metric names.
        embedding_key: the field evaluated; ``'embedding_raw'``: the descriptor before whitening.
        tag: inserted as ``<name>/<tag>/mAP_M`` so two metrics on one dataset do not clash.
    """

    # A repeated sample index must repeat these (else two samples share an index).
    consistent = {'is_query': 'is_query flags'}
    field_source = dict(
        GatheredMetric.field_source,
        embedding_raw="set by the retriever in mode='predict' when it has a whitening",
        is_query='set by the revisited Oxford / Paris dataset (True for the cropped queries)')
    prefix_names = False  # the prefix replaces the dataset name (_compute)

    def __init__(self,
                 protocols: Sequence[str] = ('easy', 'medium', 'hard'),
                 kappas: Sequence[int] = (1, 5, 10),
                 query_expansion: Optional[dict] = None,
                 database_augmentation: Optional[dict] = None,
                 rerank: Optional[dict] = None,
                 chunk_size: Optional[int] = None,
                 device: Optional[Union[str, torch.device]] = None,
                 prefix: Optional[str] = None,
                 embedding_key: str = 'embedding',
                 tag: Optional[str] = None) -> None:
        super().__init__(prefix=prefix)
        self.embedding_key, self.tag = embedding_key, tag
        protocols = (protocols, ) if isinstance(protocols, str) else tuple(protocols)
        if not protocols or any(p not in PROTOCOLS for p in protocols):
            raise ValueError(f'RevisitedMetric: protocols must be some of {tuple(PROTOCOLS)}, '
                             f'got {protocols}.')
        try:
            self.kappas = check_positive_ints(kappas, 'kappas')
            self.chunk_size = check_positive_int(chunk_size, 'chunk_size', allow_none=True)
        except ValueError as err:
            raise ValueError(f'{type(self).__name__}: {err}') from err
        self.protocols, self.device = protocols, device
        self.query_expansion = _rerank_cfg(query_expansion, 'query_expansion')
        self.database_augmentation = _rerank_cfg(database_augmentation, 'database_augmentation')
        if rerank is not None:
            check_rerank_cfg(rerank, 'RevisitedMetric: rerank')
        self.rerank = rerank

    def process(self, data_batch: Any, data_samples: Sequence) -> None:
        """Store each sample's embedding, index and query flag (CPU numpy)."""
        for sample in data_samples:
            embedding = embedding_to_numpy(self._field(sample, self.embedding_key))
            self.results.append(
                dict(embedding=embedding,
                     sample_idx=int(self._field(sample, 'sample_idx')),
                     is_query=bool(self._field(sample, 'is_query'))))

    @rank_threads()
    def _compute(self, data: Dict[str, np.ndarray]) -> Dict[str, float]:
        check_finite_embeddings(data['embedding'], data['sample_idx'], 'RevisitedMetric')
        gnd_raw = self._ground_truth()
        device = resolve_device(self.device)
        emb, is_query = data['embedding'], data['is_query']
        query, database = emb[is_query], emb[~is_query]
        n_q, n_db = len(query), len(database)
        if n_q != len(gnd_raw):
            raise ValueError(f"RevisitedMetric: {n_q} samples have is_query=True but "
                             f"dataset_meta['gnd'] describes {len(gnd_raw)} queries; expected "
                             'one query sample per ground-truth entry.')
        if n_db == 0:
            raise ValueError('RevisitedMetric: every sample has is_query=True, so the '
                             'database is empty.')
        gnds = {p: build_revisited_gnd(gnd_raw, p) for p in self.protocols}
        _check_range(gnd_raw, n_db)

        if self.database_augmentation is not None:
            database = alpha_database_augmentation(database, **self.database_augmentation,
                                                   chunk_size=self.chunk_size,
                                                   device=device)
        if self.query_expansion is not None:
            query = alpha_query_expansion(query, database, **self.query_expansion,
                                          chunk_size=self.chunk_size, device=device)

        reranked = None
        if self.rerank is not None:
            reranked = rerank_search(self.rerank, query, database,
                                     dict(type='ExactSearcher', chunk_size=self.chunk_size,
                                          device=device))[0]
        # One search for every protocol; no n_db x n_q ranking is built.
        results = revisited_metrics(query, database, gnds, self.kappas,
                                    chunk_size=self.chunk_size, device=device, reranked=reranked)

        name = self.prefix or (self.dataset_meta or {}).get('dataset_name')
        head = ''.join(f'{part}/' for part in (name, self.tag) if part)
        metrics = {}
        outputs = dict(embeddings=data['embedding'], sample_idx=data['sample_idx'],
                       is_query=is_query)
        for p in self.protocols:
            s = _SHORT[p]
            mean_ap, aps, mpr, _ = results[p]
            metrics[f'{head}mAP_{s}'] = 100 * mean_ap
            for k, value in zip(self.kappas, mpr):
                metrics[f'{head}mP@{k}_{s}'] = 100 * float(value)
            outputs[f'ap_{s}'] = 100 * aps
        self.last_outputs = outputs
        return metrics

    def _ground_truth(self) -> list:
        meta = self.dataset_meta
        if meta is None or meta.get('gnd') is None:
            raise KeyError("RevisitedMetric: dataset_meta has no 'gnd'; the test dataset's "
                           "metainfo must hold the ground truth (gnd_*.pkl['gnd']: one dict "
                           "per query with 'easy', 'hard', 'junk'), which MMEngine copies "
                           f"into the metric's dataset_meta. Got keys "
                           f'{sorted(meta) if meta else None}.')
        return list(meta['gnd'])


def _rerank_cfg(cfg: Optional[dict], name: str) -> Optional[dict]:
    if cfg is None:
        return None
    if not isinstance(cfg, dict) or set(cfg) - set(_RERANK_KEYS):
        raise ValueError(f'RevisitedMetric: {name} must be None or a dict with keys among '
                         f'{_RERANK_KEYS}, got {cfg!r}.')
    return dict(cfg)


def _check_range(gnd_raw: list, n_db: int) -> None:
    for i, g in enumerate(gnd_raw):
        for key in ('easy', 'hard', 'junk'):
            idx = np.asarray(g.get(key, ()))
            if idx.size and idx.max() >= n_db:
                raise ValueError(f"RevisitedMetric: dataset_meta['gnd'][{i}]['{key}'] holds "
                                 f'database index {idx.max()}, but only {n_db} database '
                                 'samples (is_query=False) were evaluated.')

