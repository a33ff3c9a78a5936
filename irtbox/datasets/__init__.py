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
from .nc_clean import NCCleanDataset
from .revisited import RevisitedDataset
from .sfm120k import SfM120kDataset, SfMWhitenDataset
from .sop import SOPDataset
from .spec import DatasetSpec, count_mismatch, dataset_counts, dataset_spec, dataset_specs

__all__ = [
    'BaseRetrievalDataset', 'BenchmarkSplitDataset', 'Cars196Dataset', 'CSVDataset', 'CUBDataset',
    'DatasetSpec', 'count_mismatch', 'dataset_counts', 'dataset_spec', 'dataset_specs',
    'FolderDataset', 'GLDv1NoisyDataset', 'GLDv2CleanDataset', 'INaturalist2018Dataset',
    'InShopDataset', 'NCCleanDataset', 'RevisitedDataset', 'SfM120kDataset',
    'SfMWhitenDataset', 'SOPDataset', 'add_label_noise', 'keep_class_fraction',
    'split_classes', 'tuple_collate'
]
