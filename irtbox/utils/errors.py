"""Errors that name a function's arguments, worded for whoever passed them.

The library knows its functions' arguments, not the options of the command that called them:
the message of a :class:`NamesArguments` error names arguments as ``{name}`` fields, read as
the Python argument (``input_size``) by default and as the command's option (the name with
dashes) by ``irtbox.cli``, which words every error of a command with :meth:`~NamesArguments.worded`.
"""
import re
from typing import Callable, Dict, Optional

__all__ = ['IrtboxError', 'NamesArguments', 'ArgumentError', 'word_fields']


class IrtboxError(Exception):
    """The base of every exception irtbox defines; each also derives from the built-in it
    stands for (``ValueError``, ``FileNotFoundError``, ...), so ``except ValueError`` still
    catches it. ``argument``: the name of the function argument the error concerns, or
    None; ``irtbox.cli`` words it as the command's option. The message is plain text."""

    argument = None


class NamesArguments:
    """Mixed into an exception class: its message names arguments as ``{name}`` fields;
    ``python``: {field: its Python wording} where that is not the field's name (a field for
    an option that turns something off, ``{no_space_check}``: ``'check_space=False'``)."""

    def __init__(self, message: str, *args, python: Optional[Dict[str, str]] = None):
        self.message, self.python = message, python or {}
        super().__init__(self.worded(), *args)

    def worded(self, name_of: Optional[Callable[[str], str]] = None) -> str:
        """The message with each ``{name}`` field replaced by ``name_of(name)`` (default: its
        Python wording). Only ``{identifier}`` fields are replaced: other braces stay."""
        return word_fields(self.message, name_of or (lambda name: self.python.get(name, name)))


def word_fields(text: str, name_of: Optional[Callable[[str], str]] = None) -> str:
    """``text`` with each ``{identifier}`` field replaced by ``name_of(identifier)`` (default:
    the identifier itself, the Python argument); other braces stay."""
    name_of = name_of or (lambda name: name)
    return re.sub(r'\{([a-z_][a-z0-9_]*)\}', lambda m: name_of(m.group(1)), text)


class ArgumentError(NamesArguments, IrtboxError, ValueError):
    """A value given for the argument ``argument`` that cannot be used; ``value`` is that
    value, and ``message`` says why, naming arguments (this one or others, e.g. in a hint)
    as ``{name}`` fields."""

    def __init__(self, message: str, argument: str, value=None):
        self.argument, self.value = argument, value
        super().__init__(message)
