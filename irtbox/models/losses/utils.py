"""Input checks and precision handling shared by the losses."""
import functools
import weakref
from typing import Callable, List, Optional

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


class _GpuLabelRange:
    """The smallest and largest label a module was given on a GPU, kept there and copied into
    host memory behind the GPU's work; read only once the GPU has written it (an event's query,
    never a wait)."""

    range = host = copied = None

    def update(self, labels: Tensor) -> Optional[List[int]]:
        """Fold ``labels`` in; returns the range as of the latest copy the GPU has finished
        (None while there is none)."""
        seen = None
        if self.host is not None and (self.copied is None or self.copied.query()):
            seen = self.host.tolist()
        low, high = torch.aminmax(labels)
        if self.range is None:
            cuda = labels.device.type == 'cuda'  # (a simulated GPU tensor lies on the CPU)
            self.range = torch.stack([low, high])
            self.host = torch.empty(2, dtype=self.range.dtype, pin_memory=cuda)
            self.copied = torch.cuda.Event() if cuda else None
        else:
            self.range = torch.stack([torch.minimum(self.range[0], low),
                                      torch.maximum(self.range[1], high)])
        self.host.copy_(self.range, non_blocking=True)
        if self.copied is not None:
            self.copied.record()
        return seen


# Per module (kept off the module, which is deep-copied and pickled): its labels on a GPU.
_GPU_LABEL_RANGES: 'weakref.WeakKeyDictionary[object, _GpuLabelRange]' = \
    weakref.WeakKeyDictionary()


def check_label_range(module, labels: Tensor, num_classes: int, name: str) -> None:
    """Raise a ValueError naming ``name`` unless ``labels`` lie in [0, num_classes).

    Labels on the CPU are checked at every call. Reading a GPU tensor's minimum waits for the
    GPU, which at every iteration would stall the training, so labels on a GPU are read at
    ``module``'s first call only (which catches a wrong ``num_classes``, the usual cause, at
    once); at later calls their range is kept on the GPU and copied to the host behind its
    work, and each call checks the latest copy the GPU has finished: a bad label stops the
    training a call or so later, without a wait at any call.
    """
    if labels.is_cuda and module in _GPU_LABEL_RANGES:
        seen = _GPU_LABEL_RANGES[module].update(labels)
        if seen is None:
            return
        low, high = seen
    else:
        low, high = int(labels.min()), int(labels.max())
        if labels.is_cuda:
            _GPU_LABEL_RANGES[module] = _GpuLabelRange()
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
