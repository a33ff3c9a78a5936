from .dtop import DToPNeck, LayerAggregation, aggregate_layers
from .elm import ASPP, EnhancedLocalityModule, InvertedResidual, WaveBlock
from .fusions import FeatureFusion, fast_normalized_fusion, orthogonal_fusion, project_onto
from .normalize import L2Norm
from .pca import PCAReduction, fit_pca
from .poolers import AvgPool, ClsTokenPool, DistTokenPool, GeMPool, MaxPool, gem, global_token
from .projection import FittedProjection
from .projection_head import LinearProjection
from .rmac import RMACPool, rmac, rmac_regions
from .superglobal import Gemp, Relup, Rgem, Sgem
from .whitening import LearnedWhitening

__all__ = ['AvgPool', 'ClsTokenPool', 'DistTokenPool', 'GeMPool', 'MaxPool', 'gem', 'L2Norm',
           'PCAReduction', 'fit_pca', 'RMACPool', 'rmac', 'rmac_regions',
           'FittedProjection', 'LinearProjection', 'LearnedWhitening', 'DToPNeck',
           'LayerAggregation', 'aggregate_layers', 'global_token', 'ASPP',
           'EnhancedLocalityModule', 'InvertedResidual', 'WaveBlock', 'FeatureFusion',
           'fast_normalized_fusion', 'orthogonal_fusion', 'project_onto', 'Gemp', 'Rgem', 'Sgem',
           'Relup']
