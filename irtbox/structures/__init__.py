from .data_sample import DataSample
from .vit_features import ViTFeatures

__all__ = ['DataSample', 'ViTFeatures']
