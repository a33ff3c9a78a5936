from .timm_backbone import TimmBackbone

__all__ = ['TimmBackbone']
