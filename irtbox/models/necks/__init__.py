from .normalize import L2Norm
from .pca import PCAReduction, fit_pca
from .poolers import AvgPool, ClsTokenPool, DistTokenPool, GeMPool, MaxPool, gem

__all__ = ['AvgPool', 'ClsTokenPool', 'DistTokenPool', 'GeMPool', 'MaxPool', 'gem', 'L2Norm',
           'PCAReduction', 'fit_pca']
