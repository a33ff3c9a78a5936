from .pretrained import (PretrainedWeightsUnavailable, create_timm_model, offline_hub,
                         pretrained_init_cfg)
from .timm_backbone import TimmBackbone
from .timm_preprocessor import TimmDataPreprocessor, timm_mean_std

__all__ = [
    'PretrainedWeightsUnavailable', 'TimmBackbone', 'TimmDataPreprocessor', 'create_timm_model',
    'offline_hub', 'pretrained_init_cfg', 'timm_mean_std']
