"""Class-balanced batch samplers for metric learning (P classes x M images)."""
import math
from typing import Optional

import numpy as np

from irtbox.registry import DATA_SAMPLERS
from irtbox.utils.checks import check_positive_int
from .batch_list import BatchListSampler

__all__ = ['get_dataset_labels', 'MPerClassSampler', 'OnePerClassSampler']


def get_dataset_labels(dataset) -> np.ndarray:
    """The class label of every sample of ``dataset``, without loading images.

    Uses ``dataset.get_gt_labels()`` when it exists, else the ``gt_label`` of
    ``dataset.get_data_info(i)`` (any MMEngine ``BaseDataset`` or wrapper).
    """
    if hasattr(dataset, 'get_gt_labels'):
        labels = np.asarray(dataset.get_gt_labels())
    elif hasattr(dataset, 'get_data_info'):
        labels = np.asarray([dataset.get_data_info(i)['gt_label'] for i in range(len(dataset))])
    else:
        raise TypeError(f'{type(dataset).__name__} has neither get_gt_labels() nor '
                        "get_data_info(i)['gt_label']; a class-balanced sampler needs labels")
    if labels.shape != (len(dataset), ):
        raise ValueError(f'expected one label per sample ({len(dataset)}), '
                         f'got shape {labels.shape}')
    return labels


class _CyclicStream:
    """An endless stream over ``items``: one pass after another, each pass a
    fresh permutation (``rng`` given) or the original order (``rng=None``).

    ``take(k)`` returns the next ``k`` items. For ``k <= len(items)`` they are
    distinct: when the k items straddle two passes, the items already taken
    from the old pass are deferred in the new one (a stable reorder). For ``k > len(items)`` every
    item is returned, then the stream continues (repeats are unavoidable).
    """

    def __init__(self, items: np.ndarray, rng: Optional[np.random.Generator]):
        self.items = np.asarray(items)
        self.rng = rng
        self.order = self.items
        self.pos = len(self.items)  # the first take() starts a pass

    def take(self, k: int) -> np.ndarray:
        n = len(self.items)
        if k > n:
            return np.concatenate([self.take(min(n, k - i)) for i in range(0, k, n)])
        tail = self.order[self.pos:self.pos + k]
        if len(tail) == k:
            self.pos += k
            return tail
        need = k - len(tail)
        new = self.items if self.rng is None else self.rng.permutation(self.items)
        head = new[~np.isin(new, tail)][:need]
        self.order = np.concatenate([head, new[~np.isin(new, head)]])
        self.pos = need
        return np.concatenate([tail, head])


@DATA_SAMPLERS.register_module()
class MPerClassSampler(BatchListSampler):
    """Yields indices whose consecutive chunks of ``batch_size`` are P x M
    batches: ``P = batch_size // m`` distinct classes, ``m`` images of each
    (the sampling behind batch-based metric-learning losses, e.g. the
    contrastive loss with positives in the batch, IRT Eq. 1).

    Classes are visited in passes over a random permutation (P distinct classes per batch,
    even across two passes); a class's images likewise, so all of them come up before any
    repeat. A class with fewer than ``m`` images is completed with random repeats. With
    ``shuffle=False`` the permutations are the identity. ``m = 1`` gives ``batch_size``
    distinct classes, one image each (Berton et al. Fig. 8).

    Epoch: ``max(1, len(dataset) // batch_size)`` batches, rounded up to a multiple of the
    world size W, built alike on every rank from ``(seed, epoch)``; rank r takes batches
    r, r + W, ... ``batch_size`` must equal the dataloader's (:class:`BatchListSampler`).

    Args:
        dataset: An MMEngine dataset with ``get_gt_labels()`` or ``get_data_info(i)['gt_label']``.
        batch_size (int): Per-rank batch size, a multiple of ``m``.
        m (int): Images per class in a batch.
        shuffle (bool): Random permutations (True) or identity order.
        seed, rank, world_size, infinite: as :class:`BatchListSampler`.
    """

    def __init__(self,
                 dataset,
                 batch_size: int,
                 m: int = 4,
                 shuffle: bool = True,
                 seed: Optional[int] = None,
                 rank: Optional[int] = None,
                 world_size: Optional[int] = None,
                 infinite: bool = False):
        name = type(self).__name__
        m = check_positive_int(m, f'{name}: m')
        super().__init__(dataset, batch_size, shuffle, seed, rank, world_size, infinite)
        batch_size = self.batch_size
        if batch_size % m != 0:
            raise ValueError(f'{name}: batch_size ({batch_size}) must be a multiple of m '
                             f'({m}): each batch holds batch_size // m classes with m images '
                             'each')
        self.m = m
        self.classes_per_batch = batch_size // m

        labels = get_dataset_labels(dataset)
        classes, inverse = np.unique(labels, return_inverse=True)
        if len(classes) < self.classes_per_batch:
            raise ValueError(f'{name}: a batch needs {self.classes_per_batch} distinct '
                             f'classes (batch_size {batch_size} // m {m}), but the dataset '
                             f'has only {len(classes)}')
        order = np.argsort(inverse, kind='stable')
        bounds = np.cumsum(np.bincount(inverse))[:-1]
        self.class_indices = np.split(order, bounds)  # sample indices of each class

        num_batches = max(1, len(labels) // batch_size)
        self.batches_per_rank = math.ceil(num_batches / self.world_size)

    def _global_batches(self, epoch: int) -> np.ndarray:
        """All ranks' batches of ``epoch``, (num_batches, batch_size)."""
        rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
        class_stream = _CyclicStream(np.arange(len(self.class_indices)), rng)
        image_streams = {}
        num_batches = self.batches_per_rank * self.world_size
        batches = np.empty((num_batches, self.batch_size), dtype=np.int64)
        for b in range(num_batches):
            chunks = []
            for c in class_stream.take(self.classes_per_batch):
                if c not in image_streams:
                    image_streams[c] = _CyclicStream(self.class_indices[c], rng)
                chunks.append(image_streams[c].take(self.m))
            batches[b] = np.concatenate(chunks)
        return batches


@DATA_SAMPLERS.register_module()
class OnePerClassSampler(MPerClassSampler):
    """Batches of ``batch_size`` distinct classes with one image each: an
    :class:`MPerClassSampler` with ``m = 1`` (same epoch length, passes over
    classes and images, and DDP split); arguments as :class:`MPerClassSampler`."""

    def __init__(self,
                 dataset,
                 batch_size: int,
                 shuffle: bool = True,
                 seed: Optional[int] = None,
                 rank: Optional[int] = None,
                 world_size: Optional[int] = None,
                 infinite: bool = False):
        super().__init__(dataset, batch_size, m=1, shuffle=shuffle, seed=seed,
                         rank=rank, world_size=world_size, infinite=infinite)
