"""The family of each loss of a sweep, 'contrastive' or 'classification' (the figures' line style):
read from the loss its config trains, not listed again here. A spec names its losses as its config
paths spell them (``normsoftmax`` in ``dml_..._normsoftmax_...py``); the family comes from the loss
class that config sets under ``model.head.losses`` (``PMLLoss``'s ``name``, else the ``type``): the
benchmark's lists ``PML_CLASSIFICATION_LOSSES`` / ``PML_CONTRASTIVE_LOSSES``, or a registered
subclass of ``ClassWeightLoss`` (one weight vector per class). Where the config does not exist
(yet), the name alone is matched against those classes (``arcface`` -> ``ArcFaceLoss``)."""
import os.path as osp
import re
from typing import Dict, List, Optional

from mmengine.config import Config

from irtbox.models.losses import PML_CLASSIFICATION_LOSSES, PML_CONTRASTIVE_LOSSES
from irtbox.models.losses.class_weights import ClassWeightLoss
from irtbox.registry import MODELS
from irtbox.utils.errors import ArgumentError

__all__ = ['family_of', 'loss_families']

CONTRASTIVE, CLASSIFICATION = 'contrastive', 'classification'


def _key(name: str) -> str:
    return re.sub(r'[^a-z0-9]', '', name.lower())


def _class_family(name: str) -> Optional[str]:
    """The family of a loss class name, or None for a class that is neither."""
    if name in PML_CLASSIFICATION_LOSSES:
        return CLASSIFICATION
    if name in PML_CONTRASTIVE_LOSSES:
        return CONTRASTIVE
    cls = MODELS.get(name)
    if isinstance(cls, type) and issubclass(cls, ClassWeightLoss):
        return CLASSIFICATION
    return None


def _config_losses(path: str) -> List[str]:
    """The loss classes a config trains: each ``model.head.losses`` entry's PML ``name`` or
    ``type``."""
    losses = Config.fromfile(path).get('model', {}).get('head', {}).get('losses') or {}
    entries = losses.values() if isinstance(losses, dict) else losses
    return [e.get('name') or e.get('type') for e in entries if isinstance(e, dict)]


def family_of(loss: str, families: Optional[Dict[str, str]] = None) -> str:
    """The family of ``loss`` from ``families`` (any spelling of the name), else from the
    loss class its name spells (``ArcFace``, ``multi_similarity``); ``ValueError`` if none."""
    given = {_key(k): v for k, v in (families or {}).items()}
    if _key(loss) in given:
        return given[_key(loss)]
    for name in PML_CONTRASTIVE_LOSSES + PML_CLASSIFICATION_LOSSES:
        if _key(loss) in (_key(name), _key(name[:-len('Loss')])):
            return _class_family(name)
    raise ArgumentError(f"loss {loss!r} has no family; add it to the spec's `families` "
                        "dict as 'contrastive' or 'classification'", 'loss')


def loss_families(config: str, losses: List[str], datasets: List[str],
                  families: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """loss -> family for each of ``losses``: ``families`` first, then the loss classes of
    ``config`` (a template with {loss} and {dataset}, filled with the first dataset), then
    :func:`family_of` on the name."""
    given = {_key(k): v for k, v in (families or {}).items()}
    out = {}
    for loss in losses:
        path = config.format(loss=loss, dataset=datasets[0])
        found = set()
        if _key(loss) not in given and osp.isfile(path):
            found = {_class_family(name) for name in _config_losses(path)} - {None}
        if len(found) > 1:
            raise ValueError(f'{path} trains both a contrastive and a classification loss; '
                             f"set loss {loss!r}'s family in the spec's `families` dict")
        out[loss] = found.pop() if found else family_of(loss, families)
    bad = {k: v for k, v in out.items() if v not in (CONTRASTIVE, CLASSIFICATION)}
    if bad:
        raise ValueError(f"`families` must map losses to 'contrastive' or 'classification', "
                         f'got {bad}')
    return out
