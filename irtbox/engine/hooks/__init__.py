from .checkpoint import CheckpointHook
from .dataset_counts import DatasetCountCheckHook
from .early_stopping import BestWeightsEarlyStoppingHook, StoppingState, early_stopping_step
from .gradient_noise_hook import GradientNoiseHook
from .non_finite_loss import NonFiniteLossError, NonFiniteLossHook
from .partial_fc import PartialFCHook
from .preemption import PREEMPTED_EXIT_STATUS, Preempted, PreemptionHook
from .projection_fit_hook import PCAFitHook, ProjectionFitHook, WhiteningFitHook
from .resume_check import ResumeCheckHook, ResumeRefused
from .sync_norm_stats import SyncNormStatsHook, norm_running_stats
from .tuple_mining_hook import TupleMiningHook, mine_hard_negatives
from .work_dir import WorkDirLockHook

__all__ = ['BestWeightsEarlyStoppingHook', 'CheckpointHook', 'DatasetCountCheckHook',
           'GradientNoiseHook',
           'NonFiniteLossError', 'NonFiniteLossHook', 'PartialFCHook', 'PCAFitHook',
           'PREEMPTED_EXIT_STATUS', 'Preempted', 'PreemptionHook', 'ProjectionFitHook',
           'ResumeCheckHook', 'ResumeRefused', 'StoppingState',
           'SyncNormStatsHook', 'TupleMiningHook', 'WhiteningFitHook', 'WorkDirLockHook',
           'early_stopping_step', 'mine_hard_negatives', 'norm_running_stats']
