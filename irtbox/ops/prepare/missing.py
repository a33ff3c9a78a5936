"""Before a run: the datasets a config reads whose folder is not there, each with the prepared
dataset that fills it. A training on data that was never prepared otherwise stops once the runner
is built (its environment and config logged) with a dataset class's ``FileNotFoundError``
that does not say how to get the data."""
import os.path as osp
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

from irtbox.datasets.spec import spec_of_config

__all__ = ['MissingData', 'missing_data', 'prepared_dataset', 'DIGITS']

#: What :func:`prepared_dataset` names for the quick start's digits (``prepare_digits``).
DIGITS = 'digits'
LOADER_KEYS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
# Keys whose value is not the dataset itself but a wrapper around one or several.
_WRAPPED = ('dataset', 'datasets')


@dataclass(frozen=True)
class MissingData:
    """A dataset config (at ``key``) whose ``data_root`` is not a folder; ``prepared``: the
    prepared dataset that fills it, None when irtbox does not prepare it."""
    key: str
    data_root: str
    prepared: Optional[str]


def prepared_dataset(dataset: dict, data_root: str) -> Optional[str]:
    """The name of the prepared dataset (a dataset class's spec, or :data:`DIGITS`) whose
    splits are built by the same class with the same distinguishing arguments as ``dataset``."""
    if osp.basename(osp.normpath(data_root)) == DIGITS:
        return DIGITS
    spec = spec_of_config(dataset)
    return spec.name if spec and spec.files else None


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


def missing_data(cfg, loader_keys: Sequence[str] = LOADER_KEYS) -> List[MissingData]:
    """The datasets of ``cfg``'s dataloaders ``loader_keys`` (default: train, val, test)
    whose ``data_root`` (relative to the working directory, as the datasets read it) is not
    a folder, in that order; a root on a remote storage (``s3://...``) is not checked."""
    found, seen = [], set()
    for loader_key in loader_keys:
        # A loader (or a list of them) is a wrapper of its dataset; None: no such loop.
        for key, dataset in _datasets(cfg.get(loader_key), loader_key):
            root = dataset['data_root']
            if not isinstance(root, str) or '://' in root or osp.isdir(root) or root in seen:
                continue
            seen.add(root)
            found.append(MissingData(key, root, prepared_dataset(dataset, root)))
    return found
