"""The training and test machinery: the runner, loops, hooks and optimizer wrappers."""
from .hooks import *  # noqa: F401,F403
from .hooks import __all__ as _hooks
from .loops import MultiDatasetTestLoop, MultiDatasetValLoop
from .optim_wrappers import BF16AutocastOptimWrapper
from .runner import IrtboxRunner

__all__ = _hooks + ['BF16AutocastOptimWrapper', 'IrtboxRunner', 'MultiDatasetTestLoop',
                    'MultiDatasetValLoop']
