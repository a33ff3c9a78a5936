"""Input checks and precision handling shared by the losses."""
import functools
from typing import Callable

import torch
from torch import Tensor

from irtbox.utils.errors import ArgumentError

__all__ = ['check_embeddings_labels', 'check_label_range', 'loss_forward']


def check_embeddings_labels(embeddings: Tensor, labels: Tensor, min_batch: int = 1) -> None:
    """Raise a ValueError naming the argument at fault unless embeddings is B x D float
    with B >= ``min_batch`` and labels is a B integer tensor."""
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2 \
            or not embeddings.is_floating_point():
        raise ArgumentError(f'embeddings must be a float tensor of shape B x D, got '
                            f'{getattr(embeddings, "shape", type(embeddings))}', 'embeddings')
    if not isinstance(labels, Tensor) or labels.shape != embeddings.shape[:1] \
            or labels.is_floating_point() or labels.is_complex():
        raise ArgumentError(f'labels must be an integer tensor of shape '
                            f'({embeddings.shape[0]},) matching the embeddings, got '
                            f'{getattr(labels, "dtype", type(labels))} '
                            f'{tuple(getattr(labels, "shape", ()))}', 'labels')
    if embeddings.shape[0] < min_batch:
        raise ValueError(f'needs a batch of at least {min_batch} embeddings, got '
                         f'{embeddings.shape[0]}')


def check_label_range(module, labels: Tensor, num_classes: int, name: str) -> None:
    """Raise a ValueError naming ``name`` unless ``labels`` lie in [0, num_classes).

    Reading a GPU tensor's minimum waits for the GPU, which at every iteration would
    stall the training, so labels on a GPU are checked at ``module``'s first call only
    (which catches a wrong ``num_classes``, the usual cause); labels on the CPU every time.
    """
    if labels.is_cuda and getattr(module, '_labels_checked', False):
        return
    module._labels_checked = True
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= num_classes:
        raise ValueError(f'{name}: labels must lie in [0, {num_classes}) '
                         f'(num_classes={num_classes}), got labels in [{low}, {high}]; '
                         'the training labels must be contiguous class indices')


def loss_forward(min_batch: int = 1) -> Callable:
    """Decorate ``forward(self, embeddings, labels, ...)`` of a loss module.

    Checks the inputs (:func:`check_embeddings_labels`, naming the loss class), then runs the loss
    in float32 with autocast off: under AMP the embeddings may be half/bfloat16, whose few
    significant digits are too coarse for sums over thousands of pairs, margins near a similarity,
    logs and softmaxes. Other dtypes (float32, float64) are left as they are.
    """

    def decorate(forward: Callable) -> Callable:

        @functools.wraps(forward)
        def wrapper(self, embeddings: Tensor, labels: Tensor, *args, **kwargs) -> Tensor:
            try:
                check_embeddings_labels(embeddings, labels, min_batch)
            except ValueError as err:
                raise ValueError(f'{type(self).__name__}: {err}') from err
            if embeddings.dtype in (torch.float16, torch.bfloat16):
                embeddings = embeddings.float()
            with torch.autocast(device_type=embeddings.device.type, enabled=False):
                return forward(self, embeddings, labels, *args, **kwargs)

        return wrapper

    return decorate
