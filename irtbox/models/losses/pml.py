"""Adapters to PyTorch Metric Learning (PML) losses: the 12 losses of the training-recipe
benchmark (Berton, Musgrave & Masone), with PML's defaults (docs/methods/dml_benchmark.md).

Wrapped, not re-implemented: the study ran PML 2.9, so PML's code (reducers, pair bookkeeping,
miner) defines these losses; ``'ArcFaceLoss'`` / ``'NormalizedSoftmaxLoss'`` run irtbox's formula
in PML's form (:mod:`.pml_equivalents`). PML is imported only when built
(:mod:`irtbox.models.pml_adapter`).

Classification losses keep their weights in the sub-module ``pml_loss`` (``pml_loss.W`` D x C for
ArcFace / CosFace / NormalizedSoftmax, ``pml_loss.proxies`` C x D for ProxyAnchor, ``pml_loss.fc``
D x (C * centres) for SoftTriple), so ``paramwise_cfg=dict(custom_keys={'pml_loss':
dict(lr=1.0)})`` covers all of them.
"""
import inspect
from typing import Union

from torch import Tensor, nn

from irtbox.registry import MODELS
from irtbox.utils.errors import with_prefix
from ..pml_adapter import build_pml, init_takes, pml_class
from .pml_equivalents import PMLArcFaceLoss, PMLNormalizedSoftmaxLoss
from .utils import check_label_range, loss_forward

__all__ = ['PMLLoss', 'PML_CONTRASTIVE_LOSSES', 'PML_CLASSIFICATION_LOSSES', 'PML_EQUIVALENTS',
           'DEFAULT_MINER']

#: The 12 losses of the benchmark, contrastive ("stateless") then classification.
PML_CONTRASTIVE_LOSSES = ('CircleLoss', 'ContrastiveLoss', 'MultiSimilarityLoss', 'NTXentLoss',
                          'SignalToNoiseRatioContrastiveLoss', 'ThresholdConsistentMarginLoss',
                          'TripletMarginLoss')
PML_CLASSIFICATION_LOSSES = ('ArcFaceLoss', 'CosFaceLoss', 'NormalizedSoftmaxLoss',
                             'ProxyAnchorLoss', 'SoftTripleLoss')

#: PML losses computed by irtbox's own formula in PML's form (one implementation
#: of ArcFace and of the normalised softmax; see :mod:`.pml_equivalents`).
PML_EQUIVALENTS = {'ArcFaceLoss': PMLArcFaceLoss,
                   'NormalizedSoftmaxLoss': PMLNormalizedSoftmaxLoss}

#: The miner the benchmark always uses with the contrastive losses.
DEFAULT_MINER = dict(type='PMLMiner', name='MultiSimilarityMiner')


@MODELS.register_module()
class PMLLoss(nn.Module):
    """A PyTorch Metric Learning loss (optionally with an online miner) as an
    irtbox loss ``loss(embeddings, labels) -> scalar``.

    Computes ``pml_loss(embeddings, labels, miner(embeddings, labels))`` with the PML class
    ``name`` built from ``**kwargs`` (PML's argument names and 2.9 defaults), in float32 with
    autocast off (:func:`.utils.loss_forward`).

    The 12 tested losses, equations and defaults: docs/methods/dml_benchmark.md; other PML
    classes are accepted by name. Shapes: ``embeddings`` B x D, ``labels`` B integers (in
    [0, num_classes) for the classification losses) -> scalar.

    Args:
        name (str): PML loss class name, e.g. ``'MultiSimilarityLoss'``.
        miner (dict | nn.Module | str | None): online miner (config or module), ``None`` (all
            pairs/triplets) or ``'auto'``: the multi-similarity miner (ε = 0.1) for the
            contrastive losses, none for the classification ones, as in the benchmark.
        **kwargs: PML constructor arguments. ``num_classes`` and ``embedding_size`` are
            accepted by every loss (passed to the classes with weights, checked at each call
            for all), so one key, ``model.head.losses.metric.name``, switches the loss.
    """

    def __init__(self, name: str, miner: Union[dict, nn.Module, str, None] = 'auto',
                 **kwargs) -> None:
        super().__init__()
        self.embedding_size = kwargs.get('embedding_size')
        self.num_classes = kwargs.get('num_classes')
        try:
            cls = pml_class('losses', name, 'BaseMetricLossFunction')
            for checked_only in ('embedding_size', 'num_classes'):
                if not init_takes(cls, checked_only):
                    kwargs.pop(checked_only, None)
            self.pml_loss = (_build_equivalent(name, kwargs) if name in PML_EQUIVALENTS
                             else build_pml('losses', cls, kwargs))
        except (ImportError, TypeError, ValueError) as err:
            raise with_prefix(err, type(self).__name__) from err
        self.name = name
        has_weights = any(True for _ in self.pml_loss.parameters())
        if isinstance(miner, str) and miner == 'auto':
            miner = None if has_weights else dict(DEFAULT_MINER)
        if isinstance(miner, dict):
            miner = MODELS.build(miner)
        elif miner is not None and not isinstance(miner, nn.Module):
            raise ValueError(f'PMLLoss: miner must be a config dict, a module, None or '
                             f"'auto', got {miner!r}")
        if miner is not None and name in PML_EQUIVALENTS:
            raise ValueError(f'PMLLoss: name={name!r} is computed by irtbox\'s own formula '
                             '(irtbox/models/losses/pml_equivalents.py), which takes no miner; '
                             "use miner=None or 'auto'")
        self.miner = miner

    @loss_forward()
    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        if self.embedding_size is not None and embeddings.shape[1] != self.embedding_size:
            raise ValueError(f'PMLLoss({self.name}): embedding_size={self.embedding_size} but '
                             f'the embeddings have dimension {embeddings.shape[1]}')
        if self.num_classes is not None:
            check_label_range(self, labels, self.num_classes, f'PMLLoss({self.name})')
        if self.miner is None:
            return self.pml_loss(embeddings, labels)
        return self.pml_loss(embeddings, labels, self.miner(embeddings, labels))

    def extra_repr(self) -> str:
        return f'name={self.name!r}'


def _build_equivalent(name: str, kwargs: dict) -> nn.Module:
    """irtbox's module for the PML loss ``name``; a TypeError naming the arguments otherwise."""
    cls = PML_EQUIVALENTS[name]
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise TypeError(f'cannot build {name} (irtbox\'s formula in PML\'s form, '
                        f'{cls.__module__}.{cls.__name__}) with {kwargs}: {error}. It takes '
                        f'{list(inspect.signature(cls).parameters)}; PML\'s reducers, '
                        'distances and regularisers are not offered for it') from error
