"""EmbeddingHead: runs one or more weighted losses on the embeddings."""
from typing import Dict, Optional

from torch import Tensor, nn

from irtbox.registry import MODELS
from irtbox.utils.checks import check_number

__all__ = ['EmbeddingHead']


@MODELS.register_module()
class EmbeddingHead(nn.Module):
    """Holds the training losses of a retriever and returns them as named terms.

    Shapes: ``loss(embeddings B x D, labels B, memory_embeddings B x D or None)`` returns
    ``{'loss_<name>': weight * loss(embeddings, labels)}`` per loss, which MMEngine logs and
    sums (IRT_R: L = L_contr + λ L_KoLeo, λ = 0.7; a config: docs/architecture.md). A loss of
    weight 0 is not computed, logged or fed to a memory, so λ = 0 is exactly the loss without
    the term. Losses with ``uses_memory = True`` also get ``memory_embeddings``, the momentum
    encoder's embeddings of the batch.

    Args:
        losses (dict): name -> loss config (built with ``MODELS.build``) or an
            already built ``nn.Module``. Names become the log keys ``loss_<name>``.
        loss_weights (dict, optional): name -> weight >= 0; missing names get 1.
    """

    def __init__(self, losses: Dict[str, dict],
                 loss_weights: Optional[Dict[str, float]] = None) -> None:
        super().__init__()
        if not isinstance(losses, dict) or not losses:
            raise ValueError('EmbeddingHead: losses must be a non-empty dict name -> loss '
                             f'config, got {losses!r}')
        built = {}
        for name, cfg in losses.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f'EmbeddingHead: loss name {name!r} in losses must be a '
                                 'Python identifier (it becomes the log key loss_<name>)')
            if not isinstance(cfg, nn.Module) and not (isinstance(cfg, dict) and 'type' in cfg):
                raise ValueError(f"EmbeddingHead: losses['{name}'] must be a config dict "
                                 f'with a type key or an nn.Module, got {cfg!r}')
            built[name] = MODELS.build(cfg) if isinstance(cfg, dict) else cfg
        self.losses = nn.ModuleDict(built)

        loss_weights = dict(loss_weights or {})
        for name, weight in loss_weights.items():
            if name not in built:
                raise KeyError(f'EmbeddingHead: loss_weights has key {name!r} which is not a '
                               f'loss; known losses: {sorted(built)}')
            check_number(weight, f'{type(self).__name__}: loss_weights[{name!r}]')
        self.loss_weights = {name: float(loss_weights.get(name, 1.0)) for name in built}

    def loss(self, embeddings: Tensor, labels: Tensor,
             memory_embeddings: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Weighted loss terms ``{'loss_<name>': Tensor}`` (weight-0 losses left out)."""
        # A loss declares that it takes memory_embeddings (default: no).
        with_memory = [name for name, loss in self.losses.items()
                       if getattr(loss, 'uses_memory', False) is True]
        if memory_embeddings is not None and not with_memory:
            raise ValueError('EmbeddingHead.loss: memory_embeddings were given (a momentum '
                             'encoder) but no loss uses a memory (uses_memory = True); losses: '
                             f'{list(self.losses)}')
        terms = {}
        for name, loss in self.losses.items():
            weight = self.loss_weights[name]
            if weight == 0:
                continue
            memory = dict(memory_embeddings=memory_embeddings) if name in with_memory else {}
            terms[f'loss_{name}'] = weight * loss(embeddings, labels, **memory)
        return terms

    def extra_repr(self) -> str:
        return f'loss_weights={self.loss_weights}'
