from .retrieval_metric import RetrievalMetric

__all__ = ['RetrievalMetric']
