"""Preparing the published datasets (download, verify, unpack, lay out) and checking a
prepared tree (docs/datasets.md). What to prepare and count is declared by each dataset class
(:mod:`irtbox.datasets.spec`)."""
from .check import check_dataset, format_report
from .prepare import PrepareError, prepare_dataset, read_manifest, space_needed

__all__ = ['PrepareError', 'check_dataset', 'format_report', 'prepare_dataset', 'read_manifest',
           'space_needed']
