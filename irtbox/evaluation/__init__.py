"""Evaluation: pure metric functions (functional), the nearest-neighbour search they use
(neighbours: the searchers and the faiss index) and their MMEngine wrappers (metrics)."""
from . import functional, metrics, neighbours
from .functional import knn, map_at_r, recall_at_k, retrieval_metrics
from .metrics import RetrievalMetric
from .neighbours import ExactSearcher, FaissSearcher

__all__ = [
    'functional', 'metrics', 'neighbours', 'knn', 'recall_at_k', 'map_at_r', 'retrieval_metrics',
    'RetrievalMetric', 'ExactSearcher', 'FaissSearcher'
]
