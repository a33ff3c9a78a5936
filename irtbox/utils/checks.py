"""The one check of a numeric argument, shared by every layer. Each raises an ``ArgumentError`` (a
``ValueError``) naming the argument, what was expected and the value given, e.g. ``chunk_size must
be a positive integer, got 0``; the caller that knows more (the registered class, the config entry)
adds its own context around the call. Also the check of a checkpoint argument, a file or a URL
(torch-free, as every check here: a command refuses a bad argument before importing torch)."""
import argparse
import numbers
import os.path as osp
from typing import Callable, Iterable, Optional, Tuple, Union

from .errors import ArgumentError

__all__ = ['check_int', 'check_positive_int', 'check_number', 'check_positive_ints',
           'int_argument', 'check_checkpoint']


def check_checkpoint(path: str) -> str:
    """``path`` when it is a file or a URL, else ``FileNotFoundError``."""
    if not osp.isfile(path) and not path.startswith(('http://', 'https://')):
        raise FileNotFoundError(f'checkpoint not found: {path}')
    return path


def _expected_int(minimum: int, maximum: Optional[int] = None) -> str:
    if maximum is not None:
        return f'an integer in {minimum} .. {maximum}'
    if minimum == 1:
        return 'a positive integer'
    if minimum == 0:
        return 'a non-negative integer'
    return f'an integer >= {minimum}'


def check_int(value, name: str, minimum: int = 1, maximum: Optional[int] = None,
              allow_none: bool = False) -> Optional[int]:
    """``value`` as a Python int if it is an integer (Python or numpy, not a bool) in
    ``minimum .. maximum`` (no upper bound for ``None``), or ``None`` with ``allow_none``;
    else a ValueError naming ``name``, the expected range and ``value``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum \
            or (maximum is not None and value > maximum):
        expected = _expected_int(minimum, maximum)
        raise ArgumentError(f'{name} must be {"None or " if allow_none else ""}{expected}, '
                            f'got {value!r}', name, value)
    return int(value)


def check_positive_int(value, name: str, allow_none: bool = False) -> Optional[int]:
    """:func:`check_int` with ``minimum=1``."""
    return check_int(value, name, 1, allow_none=allow_none)


def check_number(value, name: str, minimum: float = 0., strict: bool = False) -> float:
    """``value`` as a float if it is a real number (not a bool) ``>= minimum`` (``>`` with
    ``strict``); else a ValueError naming ``name``. NaN is refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            value > minimum if strict else value >= minimum):
        if minimum == 0:
            expected = 'a positive number' if strict else 'a non-negative number'
        else:
            expected = f'a number {">" if strict else ">="} {minimum}'
        raise ArgumentError(f'{name} must be {expected}, got {value!r}', name, value)
    return float(value)


def check_positive_ints(values: Union[int, Iterable[int]], name: str) -> Tuple[int, ...]:
    """A single integer or a sequence of them (the K of Recall@K, the kappas of mP@k) as a
    tuple of Python ints, each positive; else a ValueError naming ``name``, the entry at
    fault and the whole value."""
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        values = (values, )
    try:
        values = tuple(values)
    except TypeError:
        raise ArgumentError(f'{name} must be a positive integer or a sequence of them, got '
                            f'{values!r}', name, values) from None
    for k in values:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ArgumentError(f'{name} must hold positive integers, got {k!r} in '
                                f'{name}={values}', name, values)
    return tuple(int(k) for k in values)


def int_argument(minimum: int = 1) -> Callable[[str], int]:
    """An argparse ``type``: the option's text as an integer >= ``minimum`` through
    :func:`check_int`, else argparse's one-line error naming the option, e.g. ``the value must be a
    positive integer, got 0``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = text
        try:
            return check_int(value, 'the value', minimum)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    return parse
