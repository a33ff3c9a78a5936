from .checkpoint import CheckpointHook
from .dataset_counts import DatasetCountCheckHook
from .early_stopping import BestWeightsEarlyStoppingHook, StoppingState, early_stopping_step
from .gradient_noise_hook import GradientNoiseHook
from .non_finite_loss import NonFiniteLossError, NonFiniteLossHook
from .preemption import PREEMPTED_EXIT_STATUS, Preempted, PreemptionHook
from .projection_fit_hook import PCAFitHook, ProjectionFitHook, WhiteningFitHook
from .rehearsal_probe import RehearsalProbeHook
from .sync_norm_stats import SyncNormStatsHook, norm_running_stats
from .tuple_mining_hook import TupleMiningHook, mine_hard_negatives

__all__ = ['BestWeightsEarlyStoppingHook', 'CheckpointHook', 'DatasetCountCheckHook',
           'GradientNoiseHook',
           'NonFiniteLossError', 'NonFiniteLossHook', 'PCAFitHook', 'PREEMPTED_EXIT_STATUS',
           'Preempted', 'PreemptionHook', 'ProjectionFitHook', 'RehearsalProbeHook',
           'StoppingState', 'SyncNormStatsHook', 'TupleMiningHook', 'WhiteningFitHook',
           'early_stopping_step', 'mine_hard_negatives', 'norm_running_stats']
