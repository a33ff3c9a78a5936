from .gather import gather_by_sample_idx, merge_by_sample_idx, pack_results
from .retrieval_metric import RetrievalMetric
from .revisited_metric import RevisitedMetric

__all__ = [
    'RetrievalMetric', 'RevisitedMetric', 'gather_by_sample_idx', 'merge_by_sample_idx',
    'pack_results'
]
