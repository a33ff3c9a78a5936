from .timm_backbone import TimmBackbone
from .timm_preprocessor import TimmDataPreprocessor, timm_mean_std

__all__ = ['TimmBackbone', 'TimmDataPreprocessor', 'timm_mean_std']
