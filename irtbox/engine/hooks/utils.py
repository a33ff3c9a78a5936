"""Helpers shared by the hooks (and the runner)."""
from typing import Optional

from mmengine.model import is_model_wrapper
from mmengine.optim import BaseOptimWrapper
from torch import nn

__all__ = ['bare_model', 'is_training', 'resume_source']


def bare_model(runner) -> nn.Module:
    """The runner's model without its DDP (or other MMEngine) wrapper."""
    model = runner.model
    return model.module if is_model_wrapper(model) else model


def is_training(runner) -> bool:
    """Whether ``runner`` is in ``train()``: only that builds the optimizer (from
    ``before_run`` on), never ``val()`` or ``test()``."""
    return isinstance(getattr(runner, 'optim_wrapper', None), BaseOptimWrapper)


def resume_source(runner) -> Optional[str]:
    """The checkpoint ``runner`` resumes from, while ``IrtboxRunner.resume`` loads it; None
    for any other load, and under MMEngine's own ``Runner``."""
    return getattr(runner, 'resuming_from', None)
