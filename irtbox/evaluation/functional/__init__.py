"""Pure retrieval metrics on arrays/tensors, usable without any runner."""
from .knn import knn
from .map_at_r import count_relevant, map_at_r, map_at_r_from_relevance
from .recall import recall_at_k, recall_from_relevance
from .retrieval import retrieval_metrics

__all__ = [
    'knn', 'recall_at_k', 'recall_from_relevance', 'map_at_r', 'map_at_r_from_relevance',
    'count_relevant', 'retrieval_metrics'
]
