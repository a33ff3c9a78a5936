"""The model parts, one sub-package per kind; importing it registers them all in MODELS."""
from . import backbones, heads, losses, miners, necks, retrievers

__all__ = ['backbones', 'heads', 'losses', 'miners', 'necks', 'retrievers']
