"""Which miniature a dataset config reads, and the config keys that point it at one."""
import copy
import os.path as osp
from typing import Optional, Tuple

from .generic import CSV_ANN_FILE, CSV_JUNK_FILE

__all__ = ['miniature_config', 'miniature_kind', 'miniature_kinds', 'point_at_miniature']

_KIND_OF_TYPE = {
    'SOPDataset': 'sop',
    'CUBDataset': 'cub',
    'Cars196Dataset': 'cars196',
    'InShopDataset': 'inshop',
    'INaturalist2018Dataset': 'inat2018',
    'SfM120kDataset': 'sfm120k',
    'SfMWhitenDataset': 'sfm120k',  # the whitening pickle lies beside the training one
    'GLDv2CleanDataset': 'gldv2clean',
    'GLDv1NoisyDataset': 'gldv1noisy',
    'NCCleanDataset': 'ncclean',
    'FolderDataset': 'folder',
    'CSVDataset': 'csv',
}
_REVISITED = ('roxford5k', 'rparis6k')


def _reading_cfg(dataset_cfg: dict) -> dict:
    """The config of the dataset that reads the files: ``dataset_cfg`` itself or,
    through wrappers such as ``BenchmarkSplitDataset``, their inner ``dataset``."""
    while isinstance(dataset_cfg.get('dataset'), dict):
        dataset_cfg = dataset_cfg['dataset']
    return dataset_cfg


def _type_name(dataset_type) -> Optional[str]:
    # A class, or its registered name, possibly with a registry scope ('irtbox.SOPDataset').
    if isinstance(dataset_type, str):
        return dataset_type.rsplit('.', 1)[-1]
    return getattr(dataset_type, '__name__', None)


def miniature_kinds(dataset_cfg: dict) -> Tuple[str, ...]:
    """Every miniature kind a dataset config reads: its dataset's kind, then
    ``'revisitop1m'`` for a ``RevisitedDataset`` with ``distractors_list``;
    ``()`` for a dataset no miniature stands for."""
    cfg = _reading_cfg(dataset_cfg) if isinstance(dataset_cfg, dict) else {}
    name = _type_name(cfg.get('type'))
    if name == 'RevisitedDataset':
        dataset_name = cfg.get('dataset_name', 'roxford5k')
        if dataset_name not in _REVISITED:
            return ()
        return (dataset_name, 'revisitop1m') if cfg.get('distractors_list') else (dataset_name, )
    return (_KIND_OF_TYPE[name], ) if name in _KIND_OF_TYPE else ()


def miniature_kind(dataset_cfg: dict) -> Optional[str]:
    """The miniature kind of the dataset a config builds (through wrappers whose
    inner ``dataset`` is the real one), e.g. ``'rparis6k'`` for a
    ``RevisitedDataset`` with ``dataset_name='rparis6k'``; None when unknown."""
    kinds = miniature_kinds(dataset_cfg)
    return kinds[0] if kinds else None


def miniature_config(kind: str, root: str) -> dict:
    """The keys to set in the (inner) dataset config so that it reads the
    miniature ``kind`` written under ``root``.

    - every kind but ``revisitop1m``: ``data_root=root``, and ``ann_file`` and
      ``data_prefix`` back to the class defaults (the official names the
      miniature uses); for ``csv``, whose ``ann_file`` has no default,
      ``ann_file='annotations.csv'``;
    - ``revisitop1m`` (in a ``RevisitedDataset`` config): ``distractors_root``
      = ``root/jpg`` (the list's paths are relative to it) and
      ``distractors_list`` = ``root/revisitop1m.txt`` (absolute, so not
      joined to ``distractors_root``).

    A ``csv`` config that sets ``junk_file`` also needs ``junk_file='junk.csv'``
    (:func:`point_at_miniature` does it).
    """
    if kind == 'revisitop1m':
        return dict(distractors_root=osp.join(root, 'jpg'),
                    distractors_list=osp.join(root, 'revisitop1m.txt'))
    return dict(data_root=root, ann_file=CSV_ANN_FILE if kind == 'csv' else '', data_prefix=None)


def point_at_miniature(dataset_cfg: dict, root: str, kind: Optional[str] = None) -> dict:
    """A copy of ``dataset_cfg`` that reads the miniature ``kind`` (default:
    :func:`miniature_kind`) written under ``root``: :func:`miniature_config`
    applied to the reading dataset's config, inside any wrapper. For a
    ``RevisitedDataset`` with distractors call it twice, for its own kind
    and for ``'revisitop1m'``, with the two roots."""
    kind = kind or miniature_kind(dataset_cfg)
    if kind is None:
        raise ValueError(f'point_at_miniature: no miniature stands for the dataset config '
                         f'{dataset_cfg!r}')
    out = copy.deepcopy(dataset_cfg)
    cfg = _reading_cfg(out)
    cfg.update(miniature_config(kind, root))
    if kind == 'csv' and cfg.get('junk_file'):
        cfg['junk_file'] = CSV_JUNK_FILE
    return out
