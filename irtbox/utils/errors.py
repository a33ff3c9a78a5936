"""Errors that name a function's arguments, worded for whoever passed them.

The library knows its functions' arguments, not the options of the command that called them:
the message of a :class:`NamesArguments` error names arguments as ``{name}`` fields, read as
the Python argument (``input_size``) by default and as the command's option (the name with
dashes) by ``irtbox.cli``, which words every error of a command with :meth:`~NamesArguments.worded`.
"""
import re
from typing import Callable, Optional

__all__ = ['NamesArguments', 'ArgumentError']


class NamesArguments:
    """Mixed into an exception class: its message names arguments as ``{name}`` fields."""

    def __init__(self, message: str, *args):
        self.message = message
        super().__init__(self.worded(), *args)

    def worded(self, name_of: Optional[Callable[[str], str]] = None) -> str:
        """The message with each ``{name}`` field replaced by ``name_of(name)`` (default: the
        name itself). Only ``{identifier}`` fields are replaced: other braces stay as given."""
        return re.sub(r'\{([a-z_][a-z0-9_]*)\}', lambda m: (name_of or str)(m.group(1)),
                      self.message)


class ArgumentError(NamesArguments, ValueError):
    """A value given for the argument ``argument`` that cannot be used; ``value`` is that
    value, and ``message`` says why, naming arguments (this one or others, e.g. in a hint)
    as ``{name}`` fields."""

    def __init__(self, message: str, argument: str, value=None):
        self.argument, self.value = argument, value
        super().__init__(message)
