"""Evaluation: pure metric functions (functional), the searchers they search with (searchers)
and their MMEngine wrappers (metrics)."""
from . import functional, metrics, searchers
from .functional import knn, map_at_r, recall_at_k, retrieval_metrics
from .metrics import RetrievalMetric
from .searchers import ExactSearcher, FaissSearcher

__all__ = [
    'functional', 'metrics', 'searchers', 'knn', 'recall_at_k', 'map_at_r', 'retrieval_metrics',
    'RetrievalMetric', 'ExactSearcher', 'FaissSearcher'
]
