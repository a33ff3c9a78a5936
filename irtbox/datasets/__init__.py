"""Datasets (one file each), samplers and transforms of irtbox."""
from . import samplers, transforms  # noqa: F401  (register them)
from .base_dataset import BaseRetrievalDataset
from .csv_dataset import CSVDataset
from .cub import CUBDataset
from .folder import FolderDataset
from .inshop import InShopDataset
from .sop import SOPDataset

__all__ = [
    'BaseRetrievalDataset', 'CSVDataset', 'CUBDataset', 'FolderDataset', 'InShopDataset',
    'SOPDataset'
]
