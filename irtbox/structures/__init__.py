from .data_sample import DataSample

__all__ = ['DataSample']
