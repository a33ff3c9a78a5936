"""Input checks shared by the evaluation functions, and their one ``ArrayLike``.

The errors name the argument at fault (``name``) and the value given; the function that was
called is in the traceback.
"""
from typing import Optional, Tuple, Union

import numpy as np
import torch

__all__ = ['ArrayLike', 'as_float_matrix', 'as_vector', 'label_codes', 'check_finite',
           'non_finite_rows']

ArrayLike = Union[np.ndarray, torch.Tensor]


def as_float_matrix(x: ArrayLike, name: str, keep_float64: bool = False,
                    check: bool = True) -> torch.Tensor:
    """``x`` as a 2-D float tensor of finite values (float32, or float64 kept when
    ``keep_float64``; shares memory where it can), else an error naming ``name``.
    ``check=False`` leaves the NaN / inf check to the caller (see
    :func:`~irtbox.evaluation.functional.ranking.similarity_blocks`)."""
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise TypeError(f'{name} must hold real numbers, got dtype {x.dtype}.')
        t = x.detach()
    elif isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
            raise TypeError(f'{name} must hold real numbers, got dtype {x.dtype}.')
        t = torch.from_numpy(np.ascontiguousarray(x))
    else:
        raise TypeError(f'{name} must be a numpy array or a torch tensor, got '
                        f'{type(x).__name__}.')
    if t.dim() != 2:
        raise ValueError(f'{name} must be 2-D (items x dimension), got shape {tuple(t.shape)}.')
    t = t if keep_float64 and t.dtype == torch.float64 else t.float()
    if check:
        check_finite(t, name)
    return t


def check_finite(t: torch.Tensor, name: str) -> None:
    """Raise naming ``name`` if the float tensor ``t`` holds NaN or inf.

    Its minimum and maximum are finite exactly when every entry is (both propagate NaN):
    one pass with no temporary, where ``isfinite(t).all()`` needs a bool mask of the
    size of ``t`` (0.8 GB for a 1M x 768 database) and is several times slower.
    """
    if t.numel() == 0:
        return
    low, high = (float(v) for v in torch.aminmax(t))
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(f'{name} contains NaN or infinite values.')


def as_vector(v, name: str, n: int, entry: str = 'entry') -> np.ndarray:
    """``v`` (array, tensor or list) as a 1-D numpy array of ``n`` entries, one per
    embedding, else an error naming ``name`` and what an ``entry`` is."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().numpy()
    v = np.asarray(v)
    if v.shape != (n, ):
        raise ValueError(f'{name} must be 1-D with one {entry} per embedding ({n}), got '
                         f'shape {v.shape}.')
    return v


def _labels(v, name: str, n: int) -> np.ndarray:
    """``v`` as a 1-D array of ``n`` labels: an object array where strings and other values
    mix (NumPy would turn 1 into '1'), without NaN."""
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu().numpy()
    if not isinstance(v, np.ndarray) and len({isinstance(x, str) for x in v}) > 1:
        items = list(v)
        v = np.empty(len(items), object)
        v[:] = items
    v = as_vector(v, name, n, entry='label')
    nan = (np.flatnonzero(np.isnan(v)) if v.dtype.kind == 'f' else
           [i for i, x in enumerate(v) if isinstance(x, float) and x != x]
           if v.dtype == object else [])
    if len(nan):
        raise ValueError(f'{name}: the label of item {nan[0]} is NaN ({len(nan)} of {n} are); '
                         'expected a class for every item (NaN is no class)')
    return v


def label_codes(query_labels, gallery_labels, nq: int, ng: Optional[int] = None
                ) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """The query and gallery labels (arrays, tensors or lists; ``gallery_labels`` None: none)
    as int64 class codes, by the datasets' rule (``BaseRetrievalDataset``): a label is its
    value, so ``1`` and ``1.0`` are one class, ``1`` and ``'1'`` two (as a CSV's ``'05'`` and
    ``'5'``). A NaN label is refused, naming the item."""
    q = _labels(query_labels, 'query_labels', nq)
    g = None if gallery_labels is None else _labels(gallery_labels, 'gallery_labels', ng)
    parts = [q] if g is None else [q, g]
    kinds = {'number' if p.dtype.kind in 'biuf' else p.dtype.kind for p in parts}
    if len(kinds) == 1 and kinds != {'O'}:
        codes = np.unique(np.concatenate(parts), return_inverse=True)[1].astype(np.int64)
    else:  # strings and numbers: Python's equality keeps 1 and '1' apart
        seen = {}
        codes = np.fromiter((seen.setdefault(x.item() if isinstance(x, np.generic) else x,
                                             len(seen)) for p in parts for x in p),
                            np.int64, sum(len(p) for p in parts))
    return codes[:len(q)], None if g is None else codes[len(q):]


def non_finite_rows(x: np.ndarray, rows: int = 1 << 16) -> np.ndarray:
    """Indices of the rows of the n x D array ``x`` that hold NaN or inf, checked ``rows``
    rows at a time (a bool mask of a whole 10M x 768 array would take 7.7 GB)."""
    bad = [start + np.flatnonzero(~np.isfinite(x[start:start + rows]).all(axis=1))
           for start in range(0, len(x), rows)]
    return np.concatenate(bad) if bad else np.zeros(0, np.int64)
