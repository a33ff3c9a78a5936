from .pca_fit_hook import PCAFitHook

__all__ = ['PCAFitHook']
