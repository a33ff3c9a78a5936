"""Datasets (one file each), samplers and transforms of irtbox."""
from . import samplers, transforms  # noqa: F401  (register them)
from .base_dataset import BaseRetrievalDataset
from .cars196 import Cars196Dataset
from .collate import tuple_collate
from .csv_dataset import CSVDataset
from .cub import CUBDataset
from .folder import FolderDataset
from .gldv1 import GLDv1NoisyDataset
from .gldv2 import GLDv2CleanDataset
from .inaturalist import INaturalist2018Dataset
from .inshop import InShopDataset
from .label_transforms import (BenchmarkSplitDataset, add_label_noise, keep_class_fraction,
                               split_classes)
from .miniature import (MINIATURE_KINDS, miniature_config, miniature_kind, miniature_kinds,
                        point_at_miniature, write_miniature)
from .nc_clean import NCCleanDataset
from .revisited import RevisitedDataset
from .sfm120k import SfM120kDataset, SfMWhitenDataset
from .sop import SOPDataset

__all__ = [
    'BaseRetrievalDataset', 'BenchmarkSplitDataset', 'Cars196Dataset', 'CSVDataset', 'CUBDataset',
    'FolderDataset', 'GLDv1NoisyDataset', 'GLDv2CleanDataset', 'INaturalist2018Dataset',
    'InShopDataset', 'MINIATURE_KINDS', 'NCCleanDataset', 'RevisitedDataset', 'SfM120kDataset',
    'SfMWhitenDataset', 'SOPDataset', 'add_label_noise', 'keep_class_fraction', 'miniature_config',
    'miniature_kind', 'miniature_kinds', 'point_at_miniature', 'split_classes', 'tuple_collate',
    'write_miniature'
]
