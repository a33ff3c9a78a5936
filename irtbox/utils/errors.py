"""The base of the exceptions irtbox defines, and the fields that say which argument is at fault.
Messages are plain text for a Python caller. An error about an argument carries its name as
``argument``; an error whose remedy is to pass other arguments carries them as ``remedy``
({argument: value}). ``irtbox.cli`` words both as the command's options."""
from typing import Any, Dict, Optional

__all__ = ['IrtboxError', 'ArgumentError', 'with_prefix']


class IrtboxError(Exception):
    """The base of every exception irtbox defines; each also derives from the built-in it stands
    for, so ``except ValueError`` still catches it. ``argument``: the function argument the error
    concerns, or None. ``remedy``: {argument: value} the caller may pass to get past the error,
    shown after the message."""

    argument: Optional[str] = None
    remedy: Optional[Dict[str, Any]] = None

    def __init__(self, *args, argument: Optional[str] = None,
                 remedy: Optional[Dict[str, Any]] = None):
        super().__init__(*args)
        if argument is not None:
            self.argument = argument
        if remedy is not None:
            self.remedy = remedy

    def __str__(self) -> str:
        text = super().__str__()
        if self.remedy:
            text += ' (or pass ' + ', '.join(f'{k}={v!r}' for k, v in self.remedy.items()) + ')'
        return text


class ArgumentError(IrtboxError, ValueError):
    """A value (``value``) of the argument ``argument`` that cannot be used; ``message``: why."""

    def __init__(self, message: str, argument: str, value=None):
        super().__init__(message, argument=argument)
        self.message, self.value = message, value


def with_prefix(error: BaseException, prefix: str) -> BaseException:
    """``error`` again, its message led by ``prefix``, its type and fields kept: for a layer
    that adds where an error happened without turning it into another."""
    text = f'{prefix}: {error.args[0] if len(error.args) == 1 else error}'
    new = type(error).__new__(type(error), text)
    new.__dict__.update(vars(error))
    new.args = (text, )
    if isinstance(new, SyntaxError):  # its message is its msg, which __new__ leaves None
        new.msg = text
    if isinstance(new, ArgumentError):
        new.message = text
    return new
