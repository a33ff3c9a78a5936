"""The optional parts of irtbox (pip extras): a missing one is one line naming the install
command, said before any long work starts."""
import importlib.util
from typing import Sequence
from .errors import IrtboxError

__all__ = ['MissingExtraError', 'require_extra']


class MissingExtraError(IrtboxError, ImportError):
    """An optional dependency of a feature is not installed."""


def require_extra(modules: Sequence[str], extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``modules`` can be imported,
    naming the missing ones and ``pip install "irtbox[extra]"``; ``feature`` says what needs
    them (e.g. ``'serving an index'``). Nothing is imported."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        verb = 'is' if len(missing) == 1 else 'are'
        raise MissingExtraError(f'{feature} needs {", ".join(missing)}, which {verb} not '
                                f'installed: pip install "irtbox[{extra}]"')
