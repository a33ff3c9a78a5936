"""Evaluation: pure metric functions (functional) and their MMEngine wrappers (metrics)."""
from . import functional, metrics
from .functional import knn, map_at_r, recall_at_k, retrieval_metrics
from .metrics import RetrievalMetric

__all__ = [
    'functional', 'metrics', 'knn', 'recall_at_k', 'map_at_r', 'retrieval_metrics',
    'RetrievalMetric'
]
