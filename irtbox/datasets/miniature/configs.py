"""Which miniature a dataset config reads, and the config keys that point it at one: read off
the specs of the dataset classes (:mod:`irtbox.datasets.spec`)."""
import copy
from typing import Optional, Tuple

from ..spec import dataset_spec, extra_specs, spec_of_config

__all__ = ['miniature_kind', 'miniature_kinds', 'point_at_miniature']


def _reading_cfg(dataset_cfg: dict) -> dict:
    """The config of the dataset that reads the files: ``dataset_cfg`` itself or,
    through wrappers such as ``BenchmarkSplitDataset``, their inner ``dataset``."""
    while isinstance(dataset_cfg.get('dataset'), dict):
        dataset_cfg = dataset_cfg['dataset']
    return dataset_cfg


def miniature_kinds(dataset_cfg: dict) -> Tuple[str, ...]:
    """Every miniature kind a dataset config reads: its dataset's kind
    (:func:`~irtbox.datasets.spec.spec_of_config`), then those its keys add (``'revisitop1m'``
    for a ``RevisitedDataset`` with ``distractors_list``); ``()`` for a dataset no miniature
    stands for."""
    cfg = _reading_cfg(dataset_cfg) if isinstance(dataset_cfg, dict) else {}
    spec = spec_of_config(cfg)
    if spec is None or spec.miniature is None:
        return ()
    return (spec.name, *(s.name for s in extra_specs(cfg) if s.miniature))


def miniature_kind(dataset_cfg: dict) -> Optional[str]:
    """The miniature kind of the dataset a config builds (through wrappers whose
    inner ``dataset`` is the real one), e.g. ``'rparis6k'`` for a
    ``RevisitedDataset`` with ``dataset_name='rparis6k'``; None when unknown."""
    kinds = miniature_kinds(dataset_cfg)
    return kinds[0] if kinds else None


def point_at_miniature(dataset_cfg: dict, root: str, kind: Optional[str] = None) -> dict:
    """A copy of ``dataset_cfg`` that reads the miniature ``kind`` (default:
    :func:`miniature_kind`) written under ``root``: the spec's ``point`` applied to the
    reading dataset's config, inside any wrapper (by default ``data_root=root``, and
    ``ann_file`` and ``data_prefix`` back to the class defaults, the official names the
    miniature uses). For a ``RevisitedDataset`` with
    distractors call it twice, for its own kind and for ``'revisitop1m'``, with the two
    roots."""
    kind = kind or miniature_kind(dataset_cfg)
    if kind is None:
        raise ValueError(f'point_at_miniature: no miniature stands for the dataset config '
                         f'{dataset_cfg!r}')
    out = copy.deepcopy(dataset_cfg)
    dataset_spec(kind).point(_reading_cfg(out), root)
    return out
