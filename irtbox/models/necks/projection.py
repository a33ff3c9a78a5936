"""Base of the necks whose linear projection is learned from descriptors after training."""
from contextlib import contextmanager

import torch
import torch.nn as nn

__all__ = ['FittedProjection']


class FittedProjection(nn.Module):
    """``y = P (x − m)`` with ``m`` (in_dim) and ``P`` (out_dim x in_dim) held in buffers.

    The buffers are learned by a hook (``fit``) from the descriptors of a set of
    images and are saved in, and restored from, checkpoints. In training mode
    the module is the identity (the network trains at full dimension) unless
    ``train_projected`` is set. Subclasses implement ``fit``.
    """

    fit_hook = 'a fit hook'

    def __init__(self, in_dim: int, out_dim: int, train_projected: bool = False):
        super().__init__()
        name = type(self).__name__
        if not 0 < out_dim <= in_dim:
            raise ValueError(f'{name}: need 0 < out_dim <= in_dim, got out_dim={out_dim}, '
                             f'in_dim={in_dim}')
        self.in_dim, self.out_dim, self.train_projected = in_dim, out_dim, train_projected
        self.register_buffer('mean', torch.zeros(in_dim))
        self.register_buffer('projection', torch.zeros(out_dim, in_dim))
        self.register_buffer('fitted', torch.tensor(False))
        # The buffer's value on the host: reading the buffer at every forward would wait
        # for the GPU. Kept in step by set_projection and by loading a state dict.
        self._fitted = False
        self._passthrough = False

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.buffers_restored()

    def buffers_restored(self) -> None:
        """Read the buffer's value again after the buffers were written from outside."""
        self._fitted = bool(self.fitted)

    def check_input(self, x: torch.Tensor) -> None:
        if x.shape[-1] != self.in_dim:
            raise ValueError(f'{type(self).__name__}.fit: descriptors have dimension '
                             f'{x.shape[-1]}, the module expects in_dim={self.in_dim}')

    @torch.no_grad()
    def set_projection(self, mean: torch.Tensor, projection: torch.Tensor) -> None:
        self.mean.copy_(torch.as_tensor(mean)[:self.in_dim])
        self.projection.copy_(torch.as_tensor(projection)[:self.out_dim])
        self.fitted.fill_(True)
        self._fitted = True

    @contextmanager
    def passthrough(self):
        """Within this context the module is the identity (used while collecting its inputs)."""
        self._passthrough = True
        try:
            yield self
        finally:
            self._passthrough = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._passthrough or (self.training and not self.train_projected):
            return x
        if not self._fitted:
            raise RuntimeError(
                f'{type(self).__name__} is not fitted: add dict(type="{self.fit_hook}", ...) to '
                'custom_hooks so it is learned, or load a checkpoint that holds it.')
        return (x - self.mean.to(x.dtype)) @ self.projection.to(x.dtype).T
