"""Samplers registered in ``irtbox.registry.DATA_SAMPLERS``."""
from .m_per_class import MPerClassSampler, OnePerClassSampler, get_dataset_labels

__all__ = ['MPerClassSampler', 'OnePerClassSampler', 'get_dataset_labels']
