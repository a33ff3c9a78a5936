"""A searcher from a metric's ``search`` setting: an instance, a config dict or ``None``."""
import dataclasses
from typing import Union

from irtbox.registry import SEARCHERS
from irtbox.utils.config import ConfigError
from .base import Searcher
from .exact import ExactSearcher

__all__ = ['build_searcher']

# How a config names a searcher, for the error on anything else.
_FORMS = ("search=dict(type='ExactSearcher', chunk_size=None, device=None) (exact, the "
          "default) or search=dict(type='FaissSearcher', factory='IVF1024,Flat', nprobe=32) "
          '(any faiss factory string, with nprobe / ef_search, chunk_size, device)')


def build_searcher(search: Union[None, dict, Searcher], name: str = 'search') -> Searcher:
    """The searcher of a ``search`` setting: a :class:`Searcher` as given, a config dict
    ``dict(type=NAME, **settings)`` built from :data:`~irtbox.registry.SEARCHERS`, ``None``
    the exact default, :class:`ExactSearcher()`. ``name``: the argument or config entry
    that held ``search``, named in the errors (the metric or function that took it adds
    its own name, if at all).

    Raises:
        ConfigError: anything else: a dict with no registered ``type`` (the keyword form
            ``search=dict(backend=..., index=..., nprobe=...)`` that preceded the searchers
            included) or with a key its searcher does not take. The message names the
            accepted forms.
    """
    if search is None:
        return ExactSearcher()
    if isinstance(search, Searcher):
        return search
    if not isinstance(search, dict) or 'type' not in search:
        raise ConfigError(f'{name}={search!r} does not name a searcher; expected '
                          f'{_FORMS}. normalize is a setting of the metric itself.')
    settings = dict(search)
    kind = settings.pop('type')
    cls = SEARCHERS.get(kind) if isinstance(kind, str) else kind
    if not (isinstance(cls, type) and issubclass(cls, Searcher)):
        raise ConfigError(f'{name} type {kind!r} is not a registered searcher '
                          f'({", ".join(sorted(SEARCHERS.module_dict))}); expected {_FORMS}.')
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        raise ConfigError(f'{name}: {cls.__name__} has no setting {", ".join(unknown)}; '
                          f'its settings are {", ".join(fields)}.')
    return cls(**settings)
