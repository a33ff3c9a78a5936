"""What the check of a command's inputs reads of a config without importing torch (nor timm or
MMEngine's runner), so that a refusal takes well under a second: the values of well-known keys
(:func:`check_config_values`), the dataset folders it reads that are not there
(:func:`missing_roots`) and, where the dataset's class (or the digits' folder) names it, the
dataset that fills one (:func:`named_dataset`). The keys' check against the registries, which import
the parts (and torch), is :mod:`irtbox.ops.config_check`'s, and runs only once these pass."""
import os.path as osp
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from mmengine.config import Config

from irtbox.registry import type_name
from irtbox.utils.config import ConfigError

__all__ = ['check_config_values', 'missing_roots', 'named_dataset', 'DIGITS', 'LOADER_KEYS',
           'VALUE_RULES', 'PREPARED_CLASSES']

#: What :func:`~irtbox.ops.prepare.missing.prepared_dataset` names for the quick start's digits
#: (``prepare_digits``).
DIGITS = 'digits'
LOADER_KEYS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
# Keys whose value is not the dataset itself but a wrapper around one or several.
_WRAPPED = ('dataset', 'datasets')


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(low=None):
    return (lambda v: _is_number(v) and v == int(v) and (low is None or v >= low),
            'a whole number' + ('' if low is None else f' >= {low}'))


def _at_least_zero(what: str = 'a number >= 0'):
    return lambda v: _is_number(v) and v >= 0, what


#: key -> (test of a value, what it expects), wherever the key sits; None passes (a default).
#: A wrong type there otherwise breaks after the environment and config dump, words
#: confusingly (``batch_size='64'``: "64 differs from 64"), or stops at MMEngine's bare
#: ``assert`` (``max_iters``). Not a schema: only those keys.
VALUE_RULES = {
    'batch_size': _whole(1), 'num_workers': _whole(0),
    'interval': _whole(), 'max_keep_ckpts': _whole(),  # -1: every iteration's / every one
    'max_iters': _whole(1), 'max_epochs': _whole(1), 'val_interval': _whole(1),
    'lr': _at_least_zero('a learning rate: a number >= 0'),
    'betas': (lambda v: isinstance(v, (list, tuple)) and len(v) == 2
              and all(_is_number(b) for b in v), 'two numbers (b1, b2)'),
    'weight_decay': _at_least_zero(), 'momentum': _at_least_zero(),
}


def check_config_values(cfg: Config, path: str) -> None:
    """Raise :class:`~irtbox.utils.config.ConfigError` naming ``path`` and the key path at the
    first value of a :data:`VALUE_RULES` key, anywhere in ``cfg``, that breaks its rule."""
    def walk(node: Any, where: str) -> None:
        items = (node.items() if isinstance(node, (dict, Config)) else
                 enumerate(node) if isinstance(node, (list, tuple)) else ())
        for key, value in items:
            at = f'{where}.{key}' if where else str(key)
            rule = VALUE_RULES.get(key) if isinstance(key, str) else None
            if rule and value is not None and not rule[0](value):
                raise ConfigError(f'{path}: {at}: expected {rule[1]}, got {value!r}')
            walk(value, at)
    walk(cfg, '')


#: The datasets ``irtbox prepare`` writes into ``data/NAME`` and the class that reads each: a copy
#: of what the dataset classes declare (their ``specs``), which :func:`named_dataset` reads
#: without importing them (and torch); tests/test_ops/test_config_inputs.py keeps it equal.
PREPARED_CLASSES = {
    'cars196': 'Cars196Dataset', 'cub': 'CUBDataset', 'gldv1noisy': 'GLDv1NoisyDataset',
    'gldv2clean': 'GLDv2CleanDataset', 'inat2018': 'INaturalist2018Dataset',
    'inshop': 'InShopDataset', 'ncclean': 'NCCleanDataset', 'roxford5k': 'RevisitedDataset',
    'rparis6k': 'RevisitedDataset', 'sfm120k': 'SfM120kDataset', 'sop': 'SOPDataset',
}


def named_dataset(dataset: dict, data_root: str) -> Optional[str]:
    """The prepared dataset that fills ``data_root``, from names alone: the digits
    (:data:`DIGITS`) for a folder ``.../digits``, else the one NAME of :data:`PREPARED_CLASSES`
    whose class the config's ``type`` names (for a class of several, ``dataset_name=NAME``),
    wherever its folder is. None: only the dataset classes know
    (:func:`~irtbox.ops.prepare.missing.prepared_dataset`: another class, or a class of several
    datasets without ``dataset_name``, which reads its default)."""
    if osp.basename(osp.normpath(data_root)) == DIGITS:
        return DIGITS
    read_by = type_name(dataset)
    named = [name for name, cls in PREPARED_CLASSES.items()
             if cls == read_by and dataset.get('dataset_name', name) == name]
    return named[0] if len(named) == 1 else None


def _datasets(node, key: str) -> Iterator[Tuple[str, dict]]:
    """(key, config) of every dataset with a ``data_root`` in ``node``, through wrappers
    (``ConcatDataset(datasets=[...])``, ``RepeatDataset(dataset=...)``) and lists."""
    if isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            yield from _datasets(item, f'{key}.{i}')
    elif isinstance(node, dict):
        if node.get('data_root'):
            yield key, node
        for wrapped in _WRAPPED:
            if wrapped in node:
                yield from _datasets(node[wrapped], f'{key}.{wrapped}')


def missing_roots(cfg, loader_keys: Sequence[str] = LOADER_KEYS) -> List[Tuple[str, dict]]:
    """(key, dataset config) of each dataset of ``cfg``'s dataloaders ``loader_keys`` (default:
    train, val, test) whose ``data_root`` (relative to the working directory, as the datasets
    read it) is not a folder, in that order, each root once; a root on a remote storage
    (``s3://...``) is not checked."""
    found, seen = [], set()
    for loader_key in loader_keys:
        # A loader (or a list of them) is a wrapper of its dataset; None: no such loop.
        for key, dataset in _datasets(cfg.get(loader_key), loader_key):
            root = dataset['data_root']
            if not isinstance(root, str) or '://' in root or osp.isdir(root) or root in seen:
                continue
            seen.add(root)
            found.append((key, dataset))
    return found
