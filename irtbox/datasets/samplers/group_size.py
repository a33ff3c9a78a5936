"""Group-size sampling (Yokoo et al. 2020): batches of images of similar
aspect ratio, each batch later resized to its group's size."""
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence, Tuple

import numpy as np
from mmengine.dist import all_gather_object, get_dist_info
from mmengine.logging import print_log
from mmengine.utils import ProgressBar
from PIL import Image

from irtbox.registry import DATA_SAMPLERS
from irtbox.utils.errors import ArgumentError
from .batch_list import BatchListSampler

__all__ = ['DEFAULT_ASPECT_BINS', 'DEFAULT_GROUP_SIZES', 'GroupSizeSampler', 'aspect_group',
           'check_aspect_bins', 'check_group_sizes', 'get_image_sizes', 'read_image_size']

# Yokoo et al. 2020 (used by DToP): bins of the aspect ratio h / w and one
# (width, height) per group, widest first.
DEFAULT_ASPECT_BINS = (0.67, 0.77, 1.33, 1.5)
DEFAULT_GROUP_SIZES = ((512, 352), (512, 384), (448, 448), (384, 512), (352, 512))

_EXIF_ORIENTATION = 0x0112
_TRANSPOSED_ORIENTATIONS = (5, 6, 7, 8)  # rotated by 90 degrees: width and height swap
_HEADER_CHUNK = 4096


def check_aspect_bins(aspect_bins: Sequence[float], owner: str) -> Tuple[float, ...]:
    """``aspect_bins`` as a tuple, or a ValueError (naming ``owner``) unless it is a
    non-empty, strictly increasing sequence of positive numbers."""
    try:
        bins = tuple(float(b) for b in aspect_bins)
    except (TypeError, ValueError):
        bins = ()
    if not bins or bins[0] <= 0 or any(a >= b for a, b in zip(bins, bins[1:])):
        raise ValueError(f'{owner}: aspect_bins must be strictly increasing positive '
                         f'aspect ratios h / w, got {aspect_bins!r}')
    return bins


def check_group_sizes(sizes: Sequence[Sequence[int]],
                      num_groups: int) -> Tuple[Tuple[int, int], ...]:
    """``sizes`` as a tuple of (width, height), or a ValueError unless there is one positive (w,
    h) per group with h / w non-decreasing from group to group (wide groups get wide sizes; this
    catches sizes given as (h, w))."""
    try:
        sizes = tuple((int(w), int(h)) for w, h in sizes)
    except (TypeError, ValueError):
        raise ArgumentError(f'sizes must be (width, height) pairs, got {sizes!r}',
                            'sizes') from None
    if len(sizes) != num_groups or any(w <= 0 or h <= 0 for w, h in sizes):
        raise ArgumentError(f'sizes must give one positive (width, height) per group '
                            f'({num_groups} groups for {num_groups - 1} aspect bins), got '
                            f'{sizes!r}', 'sizes')
    ratios = [h / w for w, h in sizes]
    if any(a > b for a, b in zip(ratios, ratios[1:])):
        raise ValueError(f'the sizes (width, height) must go from wide to tall like '
                         f'the groups (h / w non-decreasing), got {sizes!r} with h / w '
                         f'{[round(r, 3) for r in ratios]}; were they given as (height, width)?')
    return sizes


def aspect_group(height, width, aspect_bins: Sequence[float] = DEFAULT_ASPECT_BINS) -> np.ndarray:
    """The group of images of size ``height`` x ``width`` (scalars or arrays).

    Group g collects the aspect ratios r = h / w with ``aspect_bins[g-1] <= r < aspect_bins[g]``
    (``np.digitize``): group 0 is the widest images, group ``len(aspect_bins)`` the tallest.
    """
    ratio = np.asarray(height, dtype=np.float64) / np.asarray(width, dtype=np.float64)
    return np.digitize(ratio, np.asarray(aspect_bins, dtype=np.float64))


def read_image_size(path: str) -> Tuple[int, int]:
    """(height, width) of the image at ``path`` as decoded, from its header.

    PIL reads the header only. A JPEG EXIF orientation that rotates by 90
    degrees swaps the two, as OpenCV (mmcv's default decoder with
    ``color_type='color'``) applies the orientation when decoding.
    """
    try:
        with Image.open(path) as img:
            width, height = img.size
            orientation = img.getexif().get(_EXIF_ORIENTATION, 1)
    except (OSError, SyntaxError) as e:
        raise OSError(f'cannot read the size of the image {path!r}: {e}') from e
    if orientation in _TRANSPOSED_ORIENTATIONS:
        width, height = height, width
    return height, width


def get_image_sizes(dataset, num_threads: int = 8) -> np.ndarray:
    """(N, 2) int array of the (height, width) of every sample of ``dataset``.

    From ``width`` / ``height`` in the data info when there, else from the image headers
    (:func:`read_image_size`, ``num_threads`` threads); under ``torch.distributed`` each
    process reads a share and the sizes are gathered.
    """
    if not hasattr(dataset, 'get_data_info'):
        raise TypeError(f'{type(dataset).__name__} has no get_data_info(i); the '
                        "image sizes come from its 'width'/'height' or 'img_path'")
    sizes = np.zeros((len(dataset), 2), dtype=np.int64)
    todo = []  # (sample, image path)
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        if info.get('width') is not None and info.get('height') is not None:
            sizes[i] = info['height'], info['width']
        elif info.get('img_path'):
            todo.append((i, info['img_path']))
        else:
            raise KeyError(f'sample {i} of {type(dataset).__name__} has neither '
                           f"'width'/'height' nor 'img_path' in its data info: {sorted(info)}")
    if todo:
        rank, world_size = get_dist_info()
        mine = todo[rank::world_size]
        print_log(f'reading the sizes of {len(todo)} images from their headers '
                  "(give 'width' and 'height' in the data list to skip this)", logger='current')
        bar = ProgressBar(len(mine)) if rank == 0 else None
        found = []
        with ThreadPoolExecutor(max(1, num_threads)) as pool:
            # in chunks: Executor.map submits all its tasks at once
            for start in range(0, len(mine), _HEADER_CHUNK):
                chunk = mine[start:start + _HEADER_CHUNK]
                for (i, _), size in zip(chunk, pool.map(read_image_size, [p for _, p in chunk])):
                    found.append((i, size))
                    if bar is not None:
                        bar.update()
        if world_size > 1:
            found = [item for part in all_gather_object(found) for item in part]
        for i, size in found:
            sizes[i] = size
    if (sizes <= 0).any():
        i = int(np.flatnonzero((sizes <= 0).any(1))[0])
        path = dataset.get_data_info(i).get('img_path')
        raise ValueError(f'sample {i} ({path!r}) has a non-positive size '
                         f'(height, width) = {tuple(sizes[i].tolist())}')
    return sizes


@DATA_SAMPLERS.register_module()
class GroupSizeSampler(BatchListSampler):
    """Group-size sampling (Yokoo et al., "Two-stage Discriminative Re-ranking for Large-scale
    Landmark Retrieval", CVPRW 2020; DToP Table A12): yields indices whose consecutive chunks of
    ``batch_size`` are batches of one aspect-ratio group each.

    Groups: docs/methods/dtop.md, "Group-size sampling". An image's group is a function of its
    h / w alone (:func:`aspect_group`), so :class:`~irtbox.datasets.transforms.GroupResize`
    with the same bins needs nothing from the sampler. Sizes come from the data list's
    ``width`` / ``height``, else from the image headers, read once (:func:`get_image_sizes`).

    Epoch ``e``: with ``rng = default_rng([seed, e])``, every group is shuffled and cut into
    complete batches (the remainder dropped); all batches are shuffled together and the first
    ``K * W`` dealt out, rank r taking batches r, r + W, ... (``K = complete batches // W``),
    so every rank gets K distinct complete batches. With ``shuffle=False`` the dataset order
    is kept.

    ``batch_size`` must equal the dataloader's (:class:`BatchListSampler`).

    Args:
        aspect_bins (Sequence[float]): Increasing bins of h / w (G - 1 bins
            for G groups); must match ``GroupResize``'s.
        seed, rank, world_size, infinite: as :class:`BatchListSampler`.
        num_threads (int): Threads reading image headers.
    """

    def __init__(self,
                 dataset,
                 batch_size: int,
                 aspect_bins: Sequence[float] = DEFAULT_ASPECT_BINS,
                 shuffle: bool = True,
                 seed: Optional[int] = None,
                 rank: Optional[int] = None,
                 world_size: Optional[int] = None,
                 infinite: bool = False,
                 num_threads: int = 8):
        name = type(self).__name__
        self.aspect_bins = check_aspect_bins(aspect_bins, name)
        super().__init__(dataset, batch_size, shuffle, seed, rank, world_size, infinite)
        batch_size = self.batch_size

        sizes = get_image_sizes(dataset, num_threads)
        #: group of every sample, (N,)
        self.groups = aspect_group(sizes[:, 0], sizes[:, 1], self.aspect_bins)
        num_groups = len(self.aspect_bins) + 1
        self.group_indices = [np.flatnonzero(self.groups == g) for g in range(num_groups)]
        #: number of samples of every group, (G,)
        self.group_counts = np.array([len(i) for i in self.group_indices])
        num_batches = int((self.group_counts // batch_size).sum())
        self.batches_per_rank = num_batches // self.world_size
        if self.batches_per_rank == 0:
            raise ValueError(
                f'{name}: {num_batches} complete batches of {batch_size} images from groups of '
                f'{self.group_counts.tolist()} images (aspect bins {list(self.aspect_bins)}), '
                f'fewer than one per rank ({self.world_size} ranks); use a smaller batch_size')

    def _global_batches(self, epoch: int) -> np.ndarray:
        """The batches dealt to all ranks in ``epoch``, (K * W, batch_size)."""
        rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
        batches = []
        for indices in self.group_indices:
            if rng is not None:
                indices = rng.permutation(indices)
            n = len(indices) // self.batch_size * self.batch_size
            batches.append(indices[:n].reshape(-1, self.batch_size))
        batches = np.concatenate(batches)
        if rng is not None:
            batches = batches[rng.permutation(len(batches))]
        return batches[:self.batches_per_rank * self.world_size]

