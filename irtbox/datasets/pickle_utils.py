"""Reading the pickled annotations of the landmark datasets (SfM-120k, revisited
Oxford / Paris) safely and with errors that name the file and the key at fault.

The official files are pickles of dicts, lists, strings and numbers (numpy arrays in some copies).
``pickle.load`` would run whatever code a tampered file asks for, so only those types are allowed.
"""
import os.path as osp
import pickle
from typing import Iterable, List

import numpy as np

__all__ = ['load_pickle', 'require_keys', 'as_string_list', 'as_int_array']

_ALLOWED_GLOBALS = {
    *(('builtins', name) for name in ('dict', 'list', 'tuple', 'set', 'frozenset', 'int',
                                      'float', 'complex', 'bool', 'str', 'bytes', 'bytearray')),
    ('collections', 'OrderedDict'),
    ('_codecs', 'encode'),  # bytes in protocol-2 pickles
    # numpy arrays and scalars (numpy 1.x and 2.x module names)
    *((module, name) for module in ('numpy.core.multiarray', 'numpy._core.multiarray')
      for name in ('_reconstruct', 'scalar')),
    ('numpy.core.numeric', '_frombuffer'), ('numpy._core.numeric', '_frombuffer'),
    ('numpy', 'ndarray'), ('numpy', 'dtype'),
}


class _RestrictedUnpickler(pickle.Unpickler):

    def find_class(self, module, name):
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f'refusing to load {module}.{name}: the annotation may only hold dicts, lists, '
            'strings, numbers and numpy arrays')


def load_pickle(path: str):
    """Load the annotation pickle ``path`` (an ``ann_file``) allowing only plain data (see
    module doc)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'ann_file {path!r} not found')
    try:
        with open(path, 'rb') as f:
            # latin1: numpy arrays pickled by Python 2 (numpy's advice); no effect otherwise.
            return _RestrictedUnpickler(f, encoding='latin1').load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            ImportError, IndexError) as e:
        raise ValueError(f'cannot read ann_file {path!r} as an annotation pickle: {e}') \
            from None


def require_keys(obj, keys: Iterable[str], where: str) -> None:
    """Raise unless ``obj`` is a dict holding every key of ``keys``."""
    if not isinstance(obj, dict):
        raise ValueError(f'{where}: expected a dict, got {type(obj).__name__}')
    missing = [k for k in keys if k not in obj]
    if missing:
        raise KeyError(f'{where}: missing key(s) {missing}; it has {sorted(map(str, obj))}')


def as_string_list(value, where: str) -> List[str]:
    """``value`` (a sequence of names) as a list of str."""
    if isinstance(value, (str, bytes)) or not hasattr(value, '__len__'):
        raise ValueError(f'{where}: expected a list of names, got {type(value).__name__}')
    names = list(value)
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ValueError(f'{where}[{i}]: expected a name (str), got {name!r}')
    return names


def as_int_array(value, where: str, upper: int = None) -> np.ndarray:
    """``value`` (a sequence of integers) as a 1-D int64 array; with ``upper``,
    every value must be an index in ``[0, upper)``."""
    if isinstance(value, (str, bytes)) or not hasattr(value, '__len__'):
        raise ValueError(f'{where}: expected a list of integers, got {type(value).__name__}')
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f'{where}: expected a flat list of integers, got shape {arr.shape}')
    if arr.dtype.kind not in 'iu':
        ok = arr.dtype.kind == 'f' and np.isfinite(arr).all() and (arr == np.round(arr)).all()
        if not ok:
            bad = next((v for v in arr.tolist() if not _is_integral(v)), arr.tolist()[0])
            raise ValueError(f'{where}: expected integers, got {bad!r}')
    arr = arr.astype(np.int64)
    if upper is not None:
        bad = np.flatnonzero((arr < 0) | (arr >= upper))
        if bad.size:
            raise ValueError(f'{where}[{bad[0]}] = {arr[bad[0]]} is not an index in '
                             f'[0, {upper})')
    return arr


def _is_integral(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) or (
        isinstance(v, float) and np.isfinite(v) and v == round(v))
