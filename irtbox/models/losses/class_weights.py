"""Base of the classification losses that hold one weight vector (proxy) per class."""
import math
from abc import ABC, abstractmethod
from typing import Optional

import torch
from mmengine import dist as mmdist
from torch import Tensor, nn

from irtbox.utils.checks import check_positive_int
from . import partial_fc as pfc
from .cosine import margin_softmax_loss
from .utils import check_label_range, loss_forward

__all__ = ['ClassWeightLoss']


class ClassWeightLoss(nn.Module, ABC):
    """Owns ``class_weights`` (C x D, an ``nn.Parameter`` so that an optimiser parameter group can
    target it, e.g. ``paramwise_cfg.custom_keys``), drawn uniformly in ±1/√D, and checks embeddings
    and labels against it; C = ``num_classes``, the training classes, D = ``embed_dim``.

    With ``partial_fc=dict(sample_rate=r, seed=None)`` the centres are sharded across the
    ranks (:mod:`.partial_fc`): ``class_weights`` holds this rank's rows
    ``[shard_start, shard_start + C_r)`` (the same matrix for every world size), and each
    step uses the gathered batch's classes plus sampled others, ``sample_rate`` of C in all;
    ``seed`` left out, rank 0's draw is used by every rank. A subclass gives its formula as
    :meth:`target_logit` and :attr:`logit_scale`. A sharded layer's state dict holds its rows
    only; :meth:`load_state_dict` of the whole matrix keeps this rank's rows.
    """

    def __init__(self, num_classes: int, embed_dim: int, partial_fc: Optional[dict] = None) -> None:
        super().__init__()
        name = type(self).__name__
        self.num_classes = num_classes = check_positive_int(num_classes, f'{name}: num_classes')
        self.embed_dim = embed_dim = check_positive_int(embed_dim, f'{name}: embed_dim')
        self.partial_fc = pfc.check_partial_fc(partial_fc, name)
        if self.partial_fc is None:
            bound = 1 / math.sqrt(embed_dim)
            self.class_weights = nn.Parameter(
                nn.init.uniform_(torch.empty(num_classes, embed_dim), -bound, bound))
            return
        rank, world = mmdist.get_dist_info()
        if num_classes < world:
            raise ValueError(f'{name}: partial_fc shards the {num_classes} classes over '
                             f'{world} ranks; it needs num_classes >= the number of ranks')
        seed = self.partial_fc['seed']
        # Without a seed: one from torch's generator (the same on every rank under MMEngine's
        # default randomness), made rank 0's at the first step (a forward is collective,
        # a constructor need not be: a model built on one rank alone must not wait).
        self._seed_agreed = seed is not None or world == 1
        self.seed = int(torch.randint(2**62, (), device='cpu')) if seed is None else seed
        self.world_size = world
        self.shard_start, stop = pfc.shard_range(num_classes, world, rank)
        self.class_weights = nn.Parameter(pfc.init_shard(self.shard_start, stop, embed_dim,
                                                         self.seed))
        # The training iteration (set by PartialFCHook) and the calls since it: the step's
        # sample depends on them and the seed alone.
        self.sample_step, self._calls = 0, 0
        self.register_load_state_dict_pre_hook(self._keep_own_rows)

    def set_sample_step(self, step: int) -> None:
        """Draw the coming steps' samples for training iteration ``step`` (the runner's
        :class:`~irtbox.engine.hooks.partial_fc.PartialFCHook` calls it before every iteration, so a
        resumed run draws what the uninterrupted one would have)."""
        self.sample_step, self._calls = int(step), 0

    def _keep_own_rows(self, module, state_dict, prefix, *args) -> None:
        key = prefix + 'class_weights'
        full = state_dict.get(key)
        if full is not None and len(full) == self.num_classes != len(self.class_weights):
            state_dict[key] = full[self.shard_start:self.shard_start + len(self.class_weights)]

    # The formula of a subclass: logits s·cos θ_j for the other classes and
    # s·target_logit(cos θ_y) for the target.
    logit_scale: float = 1.0

    @abstractmethod
    def target_logit(self, cos: Tensor) -> Tensor:
        """The target classes' logits before the scale, from their cosines."""

    @loss_forward()
    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """Embeddings B x D and labels B in [0, C) -> the scalar loss: the replicated one,
        or with ``partial_fc`` the sharded one of the batch gathered from every rank."""
        name = type(self).__name__
        if embeddings.shape[1] != self.embed_dim:
            raise ValueError(f'{name}: embed_dim={self.embed_dim} but the embeddings have '
                             f'dimension {embeddings.shape[1]}')
        check_label_range(self, labels, self.num_classes, name)
        if self.partial_fc is not None:
            return self.partial_fc_loss(embeddings, labels)
        return margin_softmax_loss(embeddings, labels, self.class_weights, self.target_logit,
                                   self.logit_scale)

    def partial_fc_loss(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """The loss with the sharded, sampled centres (:func:`.partial_fc.partial_fc_loss`):
        the loss of the batch gathered from every rank."""
        if not self._seed_agreed:  # every rank must draw the same classes
            import torch.distributed as dist
            seed = torch.tensor([self.seed], device=embeddings.device)
            dist.broadcast(seed, src=0)
            self.seed, self._seed_agreed = int(seed), True
        generator = None
        if self.partial_fc['sample_rate'] < 1.0:
            generator = pfc.step_generator(self.seed, self.sample_step, self._calls)
            self._calls += 1
        return pfc.partial_fc_loss(embeddings, labels, self.class_weights, self.shard_start,
                                   self.num_classes, self.target_logit, self.logit_scale,
                                   self.partial_fc['sample_rate'], generator)

    def class_weights_repr(self) -> str:
        """The start of ``extra_repr``: C, D and the sharding."""
        text = f'num_classes={self.num_classes}, embed_dim={self.embed_dim}'
        if self.partial_fc is not None:
            text += (f', partial_fc=dict(sample_rate={self.partial_fc["sample_rate"]}, '
                     f'seed={self.seed}), rows=[{self.shard_start}, '
                     f'{self.shard_start + len(self.class_weights)})')
        return text
