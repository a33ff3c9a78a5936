"""Preparing the published datasets (download, verify, unpack, lay out) and checking a
prepared tree (``irtbox prepare``, ``irtbox check``; docs/datasets.md). The facts about each
dataset are one table, :mod:`.registry`."""
from .check import check_dataset, count_mismatch, dataset_counts, format_report
from .prepare import PrepareError, prepare_dataset, read_manifest, space_needed
from .registry import DATASETS, CountView, DatasetInfo, RemoteFile, dataset_info

__all__ = ['DATASETS', 'CountView', 'DatasetInfo', 'PrepareError', 'RemoteFile',
           'check_dataset', 'count_mismatch', 'dataset_counts', 'dataset_info',
           'format_report', 'prepare_dataset', 'read_manifest', 'space_needed']
