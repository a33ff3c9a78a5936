"""The data-side factors of the training-recipe benchmark (Berton, Musgrave
and Masone): a class-disjoint validation split of the training classes, a
fraction of the training classes kept, and label noise. Pure functions on
label arrays, plus the dataset wrapper that applies them from a config."""
from typing import Hashable, Iterable, List, Optional, Tuple, Union

import numpy as np

from irtbox.registry import DATASETS
from irtbox.utils.errors import ArgumentError
from .base_dataset import BaseRetrievalDataset

__all__ = ['split_classes', 'keep_class_fraction', 'add_label_noise', 'BenchmarkSplitDataset']

# Independent random streams per factor: changing the noise never changes the kept classes.
_SPLIT_STREAM, _CLASS_STREAM, _NOISE_STREAM = 0, 1, 2


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), stream])


def _check_fraction(value: float, name: str, upper_open: bool = False) -> float:
    if not 0.0 <= value <= 1.0 or (upper_open and value == 1.0):
        bound = '[0, 1)' if upper_open else '[0, 1]'
        raise ValueError(f'{name} must be in {bound}, got {value!r}')
    return float(value)


def split_classes(num_classes: int, val_fraction: float = 0.2, order: str = 'sorted',
                  seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Split the labels ``0 .. num_classes - 1`` into training and validation
    classes, class-disjoint.

    ``round(val_fraction * num_classes)`` classes validate. ``order='sorted'`` (the benchmark's
    rule) keeps the first classes for training and validates on the last ones; ``order='random'``
    draws the validation classes with ``seed``.

    Returns:
        (train_classes, val_classes): sorted int64 arrays.
    """
    _check_fraction(val_fraction, 'val_fraction', upper_open=True)
    num_val = int(round(val_fraction * num_classes))
    if val_fraction > 0 and not 0 < num_val < num_classes:
        raise ArgumentError(f'val_fraction={val_fraction} of {num_classes} classes gives {num_val} '
                            'validation classes; need at least one for validation and one for '
                            'training', 'val_fraction')
    if order == 'sorted':
        perm = np.arange(num_classes)
    elif order == 'random':
        perm = _rng(seed, _SPLIT_STREAM).permutation(num_classes)
    else:
        raise ArgumentError(f"order must be 'sorted' or 'random', got {order!r}", 'order')
    cut = num_classes - num_val
    return np.sort(perm[:cut]).astype(np.int64), np.sort(perm[cut:]).astype(np.int64)


def keep_class_fraction(classes, fraction: float, seed: int = 0) -> np.ndarray:
    """Keep exactly ``round(fraction * len(classes))`` of ``classes``, drawn
    at random with ``seed`` (Fig. 6 of the benchmark). Returns them sorted."""
    classes = np.unique(np.asarray(classes, dtype=np.int64))
    _check_fraction(fraction, 'class_fraction')
    count = int(round(fraction * len(classes)))
    if count < 1:
        raise ValueError(f'class_fraction={fraction} of {len(classes)} classes keeps none')
    return np.sort(_rng(seed, _CLASS_STREAM).choice(classes, count, replace=False))


def add_label_noise(labels, fraction: float, classes=None,
                    seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Replace exactly ``round(fraction * N)`` labels, chosen at random, by
    another class drawn uniformly from ``classes`` (default: the classes
    present in ``labels``) minus the sample's own (Fig. 5 of the benchmark).

    Args:
        labels: (N,) int labels.
        fraction (float): Fraction of the labels to replace, in [0, 1].
        classes: The classes a replaced label is drawn from.
        seed (int): Seed of the draw.

    Returns:
        (noisy_labels, changed): the (N,) int64 labels and the sorted indices
        of the replaced ones; ``noisy_labels[changed] != labels[changed]``.
    """
    labels = np.asarray(labels, dtype=np.int64)
    classes = np.unique(labels if classes is None else np.asarray(classes, dtype=np.int64))
    _check_fraction(fraction, 'label_noise')
    count = int(round(fraction * len(labels)))
    noisy = labels.copy()
    if count == 0:
        return noisy, np.zeros(0, dtype=np.int64)
    if len(classes) < 2:
        raise ValueError(f'label_noise={fraction} needs at least 2 classes, got {len(classes)}')
    pos = np.searchsorted(classes, labels)
    if (pos >= len(classes)).any() or (classes[np.minimum(pos, len(classes) - 1)] != labels).any():
        raise ValueError('add_label_noise: every label must be one of classes')
    rng = _rng(seed, _NOISE_STREAM)
    changed = np.sort(rng.choice(len(labels), count, replace=False))
    # Uniform over the other C - 1 classes: draw a position and skip the sample's own.
    draw = rng.integers(0, len(classes) - 1, size=count)
    noisy[changed] = classes[draw + (draw >= pos[changed])]
    return noisy, changed


@DATASETS.register_module()
class BenchmarkSplitDataset(BaseRetrievalDataset):
    """One part of a dataset's training split under the recipe benchmark's data-side factors.

    The classes of ``dataset`` are split class-disjointly (:func:`split_classes`):
    ``part='val'`` is the validation classes, untouched; ``part='train'`` the training
    classes, of which :func:`keep_class_fraction` keeps ``class_fraction``, then
    :func:`add_label_noise` replaces ``label_noise`` of the labels. Labels are contiguous
    within the part and :meth:`get_gt_labels` returns the noisy ones, so samplers group by
    them. This wrapper applies ``pipeline`` itself: ``dataset`` should have none.

    Args:
        dataset (dict | BaseRetrievalDataset): The training split, or its config.
        part (str): ``'train'`` or ``'val'``.
        val_fraction (float): Fraction of the classes that validate, [0, 1).
            0 makes ``part='train'`` the whole split (no validation).
        split_order (str): ``'sorted'`` (the first classes train, the last
            validate; the benchmark's rule) or ``'random'`` (seeded).
        label_noise (float): Fraction of the training labels replaced.
        class_fraction (float): Fraction of the training classes kept.
        seed (int): Seed of every random choice above.
        **kwargs: See :class:`BaseRetrievalDataset` (``pipeline``,
            ``test_mode``, ``lazy_init``, ...).
    """

    SPLITS = ('train', 'val')

    def __init__(self,
                 dataset: Union[dict, BaseRetrievalDataset],
                 part: str = 'train',
                 val_fraction: float = 0.2,
                 split_order: str = 'sorted',
                 label_noise: float = 0.0,
                 class_fraction: float = 1.0,
                 seed: int = 0,
                 **kwargs):
        if 'split' in kwargs:
            raise ValueError("BenchmarkSplitDataset: use 'part' ('train' or 'val'), not 'split'")
        _check_fraction(val_fraction, 'BenchmarkSplitDataset: val_fraction', upper_open=True)
        _check_fraction(label_noise, 'BenchmarkSplitDataset: label_noise')
        _check_fraction(class_fraction, 'BenchmarkSplitDataset: class_fraction')
        if part == 'val' and val_fraction == 0:
            raise ValueError("BenchmarkSplitDataset: part='val' needs val_fraction > 0")
        self._dataset_cfg = dataset
        self._inner: Optional[BaseRetrievalDataset] = None
        self.val_fraction = val_fraction
        self.split_order = split_order
        self.label_noise = label_noise
        self.class_fraction = class_fraction
        self.seed = seed
        super().__init__(split=part, **kwargs)

    @property
    def dataset(self) -> BaseRetrievalDataset:
        """The wrapped dataset (built from its config on first use)."""
        if self._inner is None:
            cfg = self._dataset_cfg
            self._inner = DATASETS.build(cfg) if isinstance(cfg, dict) else cfg
            if not hasattr(self._inner, 'get_gt_labels'):
                raise TypeError(f'BenchmarkSplitDataset: dataset must have get_gt_labels(), got '
                                f'{type(self._inner).__name__}')
        return self._inner

    def parse_samples(self) -> List[dict]:
        inner = self.dataset
        labels = np.asarray(inner.get_gt_labels(), dtype=np.int64)
        keys = inner.metainfo['classes']
        train_classes, val_classes = split_classes(len(keys), self.val_fraction,
                                                   self.split_order, self.seed)
        if self.split == 'val':  # the part
            indices = np.flatnonzero(np.isin(labels, val_classes))
            new_labels = labels[indices]
        else:
            kept = keep_class_fraction(train_classes, self.class_fraction, self.seed)
            indices = np.flatnonzero(np.isin(labels, kept))
            new_labels, _ = add_label_noise(labels[indices], self.label_noise, kept, self.seed)
        samples = []
        for i, label in zip(indices.tolist(), new_labels.tolist()):
            info = inner.get_data_info(i)
            info.pop('sample_idx', None)
            info['gt_label'] = keys[label]
            samples.append(info)
        return samples

    def sort_classes(self, keys: Iterable[Hashable]) -> List[Hashable]:
        """The wrapped dataset's class order (its labels ``0 .. C-1``), kept."""
        order = {k: i for i, k in enumerate(self.dataset.metainfo['classes'])}
        return sorted(keys, key=order.__getitem__)
