"""Cross-batch memory (XBM): a FIFO queue of past embeddings and labels, the step
that composes it with any pair-based loss, and the base of the losses that offer it.

Wang et al., "Cross-Batch Memory for Embedding Learning", CVPR 2020. Pair-based
losses (contrastive, scalable NCA) compare the current batch with the memory as
well as with itself, which gives them many more (hard) negatives per step.
"""
from abc import ABC, abstractmethod
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor, nn

from irtbox.utils.checks import check_int
from irtbox.utils.dist import all_gather_cat
from irtbox.utils.errors import ArgumentError
from .utils import loss_forward

__all__ = ['CrossBatchMemory', 'MemoryPairLoss', 'PairLoss', 'build_memory',
           'pair_loss_with_memory']

#: ``pair_loss(embeddings B x D, labels B, ref_embeddings=M x D | None,
#: ref_labels=M | None) -> scalar``: a loss over the pairs of the batch with
#: itself and with M extra reference entries (the memory), passed by keyword.
PairLoss = Callable[..., Tensor]


class CrossBatchMemory(nn.Module):
    """FIFO memory of ``size`` past embeddings (``size x embed_dim``) and labels.

    The queue lives in buffers (``embeddings`` float, ``labels`` long,
    ``ptr`` = next slot to write, ``num_filled`` = valid slots, ``num_steps`` =
    calls of :meth:`step`), so it is saved in checkpoints and restored on
    resume. Their shapes are fixed at construction, hence ``embed_dim`` is
    required: a lazily allocated queue could not be loaded into a fresh model.

    In distributed training :meth:`enqueue` gathers the entries of all ranks, so every rank
    holds the same memory (a custom ``model_wrapper_cfg`` should keep
    ``broadcast_buffers=False``: re-sending a large queue every forward is costly).

    Args:
        size (int): number of entries (XBM / IRT: the training-set size).
        embed_dim (int): embedding dimension D.
        start_iter (int): warm-up: the first ``start_iter`` calls of :meth:`step` neither read nor
            fill the memory (a fast-changing model's embeddings are stale at once). Defaults to 0.
    """

    def __init__(self, size: int, embed_dim: int, start_iter: int = 0) -> None:
        super().__init__()
        name = type(self).__name__
        self.size = check_int(size, f'{name}: size')
        self.start_iter = check_int(start_iter, f'{name}: start_iter', minimum=0)
        self.register_buffer('embeddings', torch.zeros(
            self.size, check_int(embed_dim, f'{name}: embed_dim')))
        self.register_buffer('labels', torch.zeros(self.size, dtype=torch.long))
        for counter in ('ptr', 'num_filled', 'num_steps'):
            self.register_buffer(counter, torch.zeros((), dtype=torch.long))
        # The three counters on the host: reading the buffers at every step would wait for
        # the GPU. The buffers (saved in checkpoints) are written along; loading a state
        # dict reads them back.
        self._ptr = self._filled = self._steps = 0

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.buffers_restored()

    def buffers_restored(self) -> None:
        """Read the counters again after the buffers were written from outside (a loaded
        state dict, a skipped iteration rolled back)."""
        self._ptr, self._filled, self._steps = (
            int(self.ptr), int(self.num_filled), int(self.num_steps))

    @property
    def embed_dim(self) -> int:
        return self.embeddings.shape[1]

    @property
    def active(self) -> bool:
        """Whether the warm-up is over (the memory is read and filled)."""
        return self._steps >= self.start_iter

    def get(self, dtype: Optional[torch.dtype] = None) -> Tuple[Tensor, Tensor]:
        """Return copies of the valid entries: (M x D embeddings, M labels).

        M = filled slots, 0 during warm-up; slot order, not age order. Copies, because the
        memory is written in place while autograd still holds them for the backward.
        ``dtype``: of the copies (default: the buffer's).
        """
        n = self._filled if self.active else 0
        return (self.embeddings[:n].to(dtype or self.embeddings.dtype, copy=True),
                self.labels[:n].clone())

    @torch.no_grad()
    def enqueue(self, embeddings: Tensor, labels: Tensor) -> None:
        """Write a batch (B x D, B) over the oldest entries, all ranks gathered.

        When more entries arrive at once than ``size``, only the newest ``size`` are kept.
        """
        if embeddings.ndim != 2 or embeddings.shape[1] != self.embed_dim:
            raise ValueError('CrossBatchMemory.enqueue: embeddings must be B x '
                             f'{self.embed_dim}, got shape {tuple(embeddings.shape)}')
        if labels.shape != embeddings.shape[:1]:
            raise ValueError('CrossBatchMemory.enqueue: labels must have shape '
                             f'({embeddings.shape[0]},), got {tuple(labels.shape)}')
        embeddings, labels = all_gather_cat(embeddings.detach(), labels)
        embeddings, labels = embeddings[-self.size:], labels[-self.size:]
        slots = (self._ptr + torch.arange(
            embeddings.shape[0], device=self.labels.device)) % self.size
        self.embeddings[slots] = embeddings.to(self.embeddings)
        self.labels[slots] = labels.to(self.labels)
        self._ptr = (self._ptr + embeddings.shape[0]) % self.size
        self._filled = min(self.size, self._filled + embeddings.shape[0])
        self.ptr.fill_(self._ptr)
        self.num_filled.fill_(self._filled)

    def step(self, embeddings: Tensor, labels: Tensor) -> None:
        """End of one training step: enqueue (after warm-up), count the call."""
        if self.active:
            self.enqueue(embeddings, labels)
        self._steps += 1
        self.num_steps.fill_(self._steps)

    def extra_repr(self) -> str:
        return f'size={self.size}, embed_dim={self.embed_dim}, start_iter={self.start_iter}'


def build_memory(memory_size: int = 0, embed_dim: Optional[int] = None,
                 memory_start_iter: int = 0) -> Optional[CrossBatchMemory]:
    """The memory described by a loss's config keys (:class:`CrossBatchMemory`'s ``size``,
    ``embed_dim``, ``start_iter``); None for ``memory_size=0``."""
    if check_int(memory_size, 'memory_size', minimum=0) == 0:
        return None
    if embed_dim is None:
        raise ArgumentError(f'memory_size={memory_size} needs embed_dim (the '
                            'embedding dimension) so that the memory buffers have a fixed '
                            'shape and load from checkpoints', 'memory_size')
    return CrossBatchMemory(memory_size, embed_dim, memory_start_iter)


def pair_loss_with_memory(pair_loss: PairLoss, memory: Optional[CrossBatchMemory],
                          embeddings: Tensor, labels: Tensor,
                          memory_embeddings: Optional[Tensor] = None) -> Tensor:
    """One XBM step of a pair-based loss: batch vs (batch ∪ memory), then enqueue.

    1. Read the memory entries (M x D, M; none without a memory or during
       its warm-up), in the dtype of ``embeddings``.
    2. ``loss = pair_loss(embeddings, labels, ref_embeddings=..., ref_labels=...)`` (keywords, so a
       ``functools.partial`` that fixes the loss's hyper-parameters by keyword fits).
    3. In training mode (``memory.training``), enqueue ``memory_embeddings`` (e.g. momentum-encoder
       keys, in the order of ``labels``) if given, else the detached ``embeddings``. The memory is
       read in eval mode but not filled.

    The batch is enqueued only after the loss, so it is never its own positive. ``memory``
    None: the batch only (then ``memory_embeddings`` is an error). Returns the scalar of
    ``pair_loss``.
    """
    if memory_embeddings is not None:
        if memory is None:
            raise ArgumentError('memory_embeddings were given but memory_size=0 '
                                '(no memory to fill)', 'memory_embeddings')
        if memory_embeddings.shape != embeddings.shape:
            raise ArgumentError(f'memory_embeddings must have the shape of embeddings '
                                f'{tuple(embeddings.shape)}, got {tuple(memory_embeddings.shape)}',
                                'memory_embeddings')
    if memory is None:
        return pair_loss(embeddings, labels)
    if embeddings.shape[1] != memory.embed_dim:
        raise ValueError(f'embed_dim={memory.embed_dim} but the embeddings have '
                         f'dimension {embeddings.shape[1]}')
    ref_embeddings, ref_labels = memory.get(embeddings.dtype)
    loss = pair_loss(embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels)
    if memory.training:
        memory.step(embeddings if memory_embeddings is None else memory_embeddings, labels)
    return loss


class MemoryPairLoss(nn.Module, ABC):
    """Base of the pair-based losses with an optional cross-batch memory.

    Holds a :class:`CrossBatchMemory` (or None) as ``memory`` (:func:`build_memory`) and
    computes the forward with :func:`pair_loss_with_memory` on the subclass's
    :meth:`pair_loss`. ``uses_memory = True`` tells :class:`~irtbox.models.heads.EmbeddingHead`
    to pass the momentum-encoder embeddings (``memory_embeddings``).
    """

    uses_memory = True

    def __init__(self, memory_size: int = 0, embed_dim: Optional[int] = None,
                 memory_start_iter: int = 0) -> None:
        super().__init__()
        try:
            self.memory = build_memory(memory_size, embed_dim, memory_start_iter)
        except ValueError as err:
            raise ValueError(f'{type(self).__name__}: {err}') from err

    @abstractmethod
    def pair_loss(self, embeddings: Tensor, labels: Tensor,
                  ref_embeddings: Optional[Tensor] = None,
                  ref_labels: Optional[Tensor] = None) -> Tensor:
        """The loss's :data:`PairLoss`, with its hyper-parameters."""

    @loss_forward()
    def forward(self, embeddings: Tensor, labels: Tensor,
                memory_embeddings: Optional[Tensor] = None) -> Tensor:
        """Loss of the batch; then enqueue ``memory_embeddings`` (momentum-encoder
        keys in the order of ``labels``) if given, else the detached embeddings."""
        try:
            return pair_loss_with_memory(self.pair_loss, self.memory, embeddings, labels,
                                         memory_embeddings)
        except ValueError as err:  # memory_embeddings / embed_dim disagree with the batch
            raise ValueError(f'{type(self).__name__}: {err}') from err
