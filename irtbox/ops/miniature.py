"""Miniatures: tiny datasets in the official file layout of each dataset irtbox reads, so that any
config runs end to end in seconds (rehearsals) and tests have fixtures. Each dataset class's spec
declares its own writer and the config keys that point it at a miniature
(:mod:`irtbox.datasets.spec`); this module picks the writer of a kind and the kinds a config reads.
"""
import copy
import inspect
import os
from functools import partial
from typing import Optional, Tuple

from irtbox.datasets.miniature import DEFAULT_SIZE, ImageFn, class_image
from irtbox.datasets.spec import dataset_spec, dataset_specs, extra_specs, spec_of_config
from irtbox.utils.checks import check_int

__all__ = ['miniature_kind', 'miniature_kinds', 'point_at_miniature', 'write_miniature',
           'MINIATURE_KINDS']

# The built-in kinds (write_miniature also writes those of classes registered later).
MINIATURE_KINDS = tuple(name for name, spec in dataset_specs().items() if spec.miniature)


def write_miniature(kind: str, root: str, image_fn: Optional[ImageFn] = None,
                    size: Optional[int] = None, **options) -> str:
    """Write a tiny dataset of ``kind`` in its official layout under ``root`` (which must not exist
    or be empty: a leftover file could become part of the dataset); returns ``root``.
    ``image_fn(class_index, image_index)`` returns an H x W x 3 uint8 BGR image (None: the
    class-coloured stripes of ``class_image``, ``size`` pixels a side, default 32); ``options``: the
    arguments of the kind's writer (mostly ``classes`` and ``per_class``)."""
    writers = {name: spec.miniature for name, spec in dataset_specs().items() if spec.miniature}
    if kind not in writers:
        raise ValueError(f'write_miniature: unknown kind {kind!r}; expected one of '
                         f'{list(writers)}')
    writer = writers[kind]
    bound = getattr(writer, 'keywords', {})  # a functools.partial's (roxford5k's dataset_name)
    accepted = [p for p in inspect.signature(writer).parameters
                if p not in ('root', 'image_fn', *bound)]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f'write_miniature({kind!r}): unknown options {unknown}; '
                        f'this kind takes {accepted}')
    if image_fn is None:
        size = check_int(DEFAULT_SIZE if size is None else size, 'size', 8)
        image_fn = partial(class_image, size=size)
    elif size is not None:
        raise ValueError('write_miniature: size sets the default images; image_fn draws its own')
    if os.path.isdir(root) and os.listdir(root):
        raise FileExistsError(f'write_miniature: {root!r} is not empty; a leftover file '
                              'could become part of the dataset')
    writer(root, image_fn, **options)
    return root


def _reading_cfg(dataset_cfg: dict) -> dict:
    """The config of the dataset that reads the files: ``dataset_cfg`` itself or, through
    wrappers such as ``BenchmarkSplitDataset``, their inner ``dataset``."""
    while isinstance(dataset_cfg.get('dataset'), dict):
        dataset_cfg = dataset_cfg['dataset']
    return dataset_cfg


def miniature_kinds(dataset_cfg: dict) -> Tuple[str, ...]:
    """Every miniature kind a dataset config reads: its dataset's kind, then those its keys
    add (``'revisitop1m'`` for a ``RevisitedDataset`` with ``distractors_list``); ``()`` for a
    dataset no miniature stands for."""
    cfg = _reading_cfg(dataset_cfg) if isinstance(dataset_cfg, dict) else {}
    spec = spec_of_config(cfg)
    if spec is None or spec.miniature is None:
        return ()
    return (spec.name, *(s.name for s in extra_specs(cfg) if s.miniature))


def miniature_kind(dataset_cfg: dict) -> Optional[str]:
    """The first of :func:`miniature_kinds` (e.g. ``'rparis6k'`` for a ``RevisitedDataset``
    with ``dataset_name='rparis6k'``); None when unknown."""
    kinds = miniature_kinds(dataset_cfg)
    return kinds[0] if kinds else None


def point_at_miniature(dataset_cfg: dict, root: str, kind: Optional[str] = None) -> dict:
    """A copy of ``dataset_cfg`` that reads the miniature ``kind`` written under ``root`` (the
    spec's ``point``, inside any wrapper). For a ``RevisitedDataset`` with distractors call
    it twice, for its own kind and for ``'revisitop1m'``."""
    kind = kind or miniature_kind(dataset_cfg)
    if kind is None:
        raise ValueError(f'point_at_miniature: no miniature stands for the dataset config '
                         f'{dataset_cfg!r}')
    out = copy.deepcopy(dataset_cfg)
    dataset_spec(kind).point(_reading_cfg(out), root)
    return out
