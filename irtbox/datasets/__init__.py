"""Datasets (one file each), samplers and transforms of irtbox."""
from . import samplers, transforms  # noqa: F401  (register them)
from .base_dataset import BaseRetrievalDataset
from .collate import tuple_collate
from .csv_dataset import CSVDataset
from .cub import CUBDataset
from .folder import FolderDataset
from .gldv1 import GLDv1NoisyDataset
from .gldv2 import GLDv2CleanDataset
from .inshop import InShopDataset
from .nc_clean import NCCleanDataset
from .revisited import RevisitedDataset
from .sfm120k import SfM120kDataset, SfMWhitenDataset
from .sop import SOPDataset

__all__ = [
    'BaseRetrievalDataset', 'CSVDataset', 'CUBDataset', 'FolderDataset', 'GLDv1NoisyDataset',
    'GLDv2CleanDataset', 'InShopDataset', 'NCCleanDataset', 'RevisitedDataset', 'SfM120kDataset',
    'SfMWhitenDataset', 'SOPDataset', 'tuple_collate'
]
