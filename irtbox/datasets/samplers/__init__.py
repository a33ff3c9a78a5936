"""Samplers registered in ``irtbox.registry.DATA_SAMPLERS``."""
from .group_size import GroupSizeSampler
from .m_per_class import MPerClassSampler, OnePerClassSampler, get_dataset_labels

__all__ = ['GroupSizeSampler', 'MPerClassSampler', 'OnePerClassSampler', 'get_dataset_labels']
