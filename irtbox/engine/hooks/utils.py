"""Helpers shared by the hooks."""
from mmengine.model import is_model_wrapper
from torch import nn

__all__ = ['bare_model']


def bare_model(runner) -> nn.Module:
    """The runner's model without its DDP (or other MMEngine) wrapper."""
    model = runner.model
    return model.module if is_model_wrapper(model) else model
