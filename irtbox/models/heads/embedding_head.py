"""EmbeddingHead: runs one or more weighted losses on the embeddings."""
import inspect
from typing import Dict, Optional

from torch import Tensor, nn

from irtbox.registry import MODELS


@MODELS.register_module()
class EmbeddingHead(nn.Module):
    """Holds the training losses of a retriever and returns them as named terms.

    ``loss(embeddings, labels, **kwargs)`` returns ``{'loss_<name>': weight *
    loss(embeddings, labels)}`` for every configured loss, so MMEngine logs
    each term and sums them (IRT_R: L = L_contr + λ L_KoLeo, λ = 0.7).

    - Weights default to 1. A loss with weight 0 is not computed at all (no
      time spent, no log entry, and a loss with a memory does not fill it),
      so e.g. λ = 0 in an ablation is exactly the loss without the term.
    - Extra keyword arguments (e.g. ``memory_embeddings`` from a momentum
      encoder) go only to the losses whose ``forward`` has a parameter of that
      name (read once at build time); a keyword that no loss takes is an error.

    Shapes: ``embeddings`` B x D (L2-normalised), ``labels`` B -> dict of scalars.

    Example config (IRT_R with XBM on SOP)::

        head=dict(
            type='EmbeddingHead',
            losses=dict(
                contrastive=dict(type='ContrastiveLoss', margin=0.5,
                                 memory_size=59551, embed_dim=384),
                koleo=dict(type='KoLeoLoss')),
            loss_weights=dict(koleo=0.7))

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
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise ValueError(f"EmbeddingHead: loss_weights['{name}'] must be a number "
                                 f'>= 0, got {weight!r}')
        self.loss_weights = {name: float(loss_weights.get(name, 1.0)) for name in built}
        self._kwarg_names = {name: _keyword_names(loss) for name, loss in built.items()}

    def loss(self, embeddings: Tensor, labels: Tensor, **kwargs) -> Dict[str, Tensor]:
        """Weighted loss terms ``{'loss_<name>': Tensor}`` (weight-0 losses left out)."""
        for key in kwargs:
            if not any(key in names for names in self._kwarg_names.values()):
                raise TypeError(f'EmbeddingHead.loss: no loss accepts the keyword {key!r}; '
                                'accepted keywords: '
                                f'{ {n: sorted(k) for n, k in self._kwarg_names.items()} }')
        terms = {}
        for name, loss in self.losses.items():
            weight = self.loss_weights[name]
            if weight == 0:
                continue
            own = {k: v for k, v in kwargs.items() if k in self._kwarg_names[name]}
            terms[f'loss_{name}'] = weight * loss(embeddings, labels, **own)
        return terms

    def extra_repr(self) -> str:
        return f'loss_weights={self.loss_weights}'


def _keyword_names(loss: nn.Module) -> frozenset:
    """Names of the forward parameters after (embeddings, labels)."""
    params = list(inspect.signature(loss.forward).parameters.values())[2:]
    return frozenset(p.name for p in params
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
