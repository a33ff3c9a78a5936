"""Before a run: the datasets a config reads whose folder is not there, each with the prepared
dataset that fills it. A training on data that was never prepared otherwise stops once the runner
is built (its environment and config logged) with a dataset class's ``FileNotFoundError``
that does not say how to get the data."""
from dataclasses import dataclass
from typing import List, Optional, Sequence

from irtbox.datasets.spec import spec_of_config
from irtbox.ops.config_inputs import DIGITS, LOADER_KEYS, missing_roots, named_dataset

__all__ = ['MissingData', 'missing_data', 'prepared_dataset', 'DIGITS']


@dataclass(frozen=True)
class MissingData:
    """A dataset config (at ``key``) whose ``data_root`` is not a folder; ``prepared``: the
    prepared dataset that fills it, None when irtbox does not prepare it."""
    key: str
    data_root: str
    prepared: Optional[str]


def prepared_dataset(dataset: dict, data_root: str) -> Optional[str]:
    """The name of the prepared dataset (a dataset class's spec, or :data:`DIGITS`) whose
    splits are built by the same class with the same distinguishing arguments as ``dataset``
    (:func:`~irtbox.ops.config_inputs.named_dataset` where the names say it)."""
    named = named_dataset(dataset, data_root)
    if named:
        return named
    spec = spec_of_config(dataset)
    return spec.name if spec and spec.files else None


def missing_data(cfg, loader_keys: Sequence[str] = LOADER_KEYS) -> List[MissingData]:
    """The datasets of ``cfg``'s dataloaders ``loader_keys`` (default: train, val, test)
    whose ``data_root`` is not a folder (:func:`~irtbox.ops.config_inputs.missing_roots`),
    each with the prepared dataset that fills it."""
    return [MissingData(key, dataset['data_root'], prepared_dataset(dataset, dataset['data_root']))
            for key, dataset in missing_roots(cfg, loader_keys)]
