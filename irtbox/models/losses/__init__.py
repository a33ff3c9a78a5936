"""Losses: modules called ``loss(embeddings, labels) -> scalar``, pure functions beside them.

The modules check their inputs and compute in float32 with autocast off
(see :func:`.utils.loss_forward`); losses with a cross-batch memory derive from
:class:`.xbm.MemoryPairLoss`. The losses with one centre per class
(ArcFace, CosFace, normalised softmax) shard their centres across ranks with
``partial_fc=dict(sample_rate=...)`` (see :mod:`.partial_fc`).
"""
from .arcface import ArcFaceLoss, arcface_loss, arcface_target_logit
from .cosface import CosFaceLoss, cosface_loss
from .cosine import cosine_to_classes
from .contrastive import ContrastiveLoss, contrastive_loss
from .koleo import KoLeoLoss, koleo_loss
from .normalized_softmax import NormalizedSoftmaxLoss, normalized_softmax_loss
from .partial_fc import partial_fc_loss, sharded_layers
from .pml import PML_CLASSIFICATION_LOSSES, PML_CONTRASTIVE_LOSSES, PMLLoss
from .snca import ScalableNCALoss, scalable_nca_loss
from .tuple_contrastive import TupleContrastiveLoss, tuple_contrastive_loss
from .xbm import CrossBatchMemory, build_memory, pair_loss_with_memory

__all__ = [
    'ArcFaceLoss', 'arcface_loss', 'arcface_target_logit', 'cosine_to_classes',
    'CosFaceLoss', 'cosface_loss', 'partial_fc_loss', 'sharded_layers',
    'ContrastiveLoss', 'contrastive_loss', 'KoLeoLoss', 'koleo_loss', 'NormalizedSoftmaxLoss',
    'normalized_softmax_loss', 'PMLLoss', 'PML_CLASSIFICATION_LOSSES',
    'PML_CONTRASTIVE_LOSSES', 'ScalableNCALoss', 'scalable_nca_loss', 'CrossBatchMemory',
    'build_memory', 'pair_loss_with_memory', 'TupleContrastiveLoss', 'tuple_contrastive_loss'
]
