from .retrieval_metric import RetrievalMetric
from .revisited_metric import RevisitedMetric

__all__ = ['RetrievalMetric', 'RevisitedMetric']
