from .projection_fit_hook import PCAFitHook, ProjectionFitHook, WhiteningFitHook

__all__ = ['PCAFitHook', 'ProjectionFitHook', 'WhiteningFitHook']
