from .projection_fit_hook import PCAFitHook, ProjectionFitHook, WhiteningFitHook
from .tuple_mining_hook import TupleMiningHook, mine_hard_negatives

__all__ = ['PCAFitHook', 'ProjectionFitHook', 'TupleMiningHook', 'WhiteningFitHook',
           'mine_hard_negatives']
