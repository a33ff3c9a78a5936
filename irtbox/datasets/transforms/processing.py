"""Geometric transforms missing from mmcv: random crop and crop to a box."""
import numbers
from typing import Sequence, Tuple, Union

import numpy as np
from mmcv.transforms import BaseTransform
from mmcv.transforms.utils import cache_randomness

from irtbox.registry import TRANSFORMS
from irtbox.utils.checks import check_int

__all__ = ['RandomCrop', 'CropBBox']


def _pair(size: Union[int, Sequence[int]], name: str) -> Tuple[int, int]:
    if isinstance(size, numbers.Integral):
        size = (size, size)
    if len(size) != 2:
        raise ValueError(f'{name} must be a positive int or (height, width), got {size!r}')
    return tuple(check_int(s, name) for s in size)


@TRANSFORMS.register_module()
class RandomCrop(BaseTransform):
    """Crop a random ``crop_size`` window from ``results['img']`` (e.g. 224
    from a 256 x 256 resize, the category-level training augmentation of IRT).

    Reads ``img`` (H x W [x C]); writes ``img`` (h x w [x C], a copy) and ``img_shape`` = (h, w).
    The top-left corner is uniform over the valid positions (``np.random``, seeded by MMEngine per
    worker). An image smaller than the crop is an error (resize first).

    Args:
        crop_size (int | tuple[int, int]): Output size; an int means square,
            a tuple is (height, width).
    """

    def __init__(self, crop_size: Union[int, Sequence[int]]):
        self.crop_size = _pair(crop_size, 'RandomCrop: crop_size')

    @cache_randomness
    def _corner(self, height: int, width: int) -> Tuple[int, int]:
        h, w = self.crop_size
        return np.random.randint(0, height - h + 1), np.random.randint(0, width - w + 1)

    def transform(self, results: dict) -> dict:
        img = results['img']
        height, width = img.shape[:2]
        h, w = self.crop_size
        if h > height or w > width:
            raise ValueError(f'RandomCrop: crop {self.crop_size} (h, w) is larger than the '
                             f'image {(height, width)} of {results.get("img_path")!r}')
        y, x = self._corner(height, width)
        results['img'] = img[y:y + h, x:x + w].copy()
        results['img_shape'] = (h, w)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(crop_size={self.crop_size})'


@TRANSFORMS.register_module()
class CropBBox(BaseTransform):
    """Crop ``results['img']`` to the box ``results[bbox_key]`` = [x1, y1, x2, y2] in pixels of the
    loaded image, as the revisited Oxford/Paris protocol (Radenovic et al., "Revisiting Oxford and
    Paris", CVPR 2018) does with the query images before any resizing.

    Coordinates are rounded half-to-even (as PIL's ``Image.crop`` in the reference code),
    right/bottom exclusive, clipped to the image: ``img[y1:y2, x1:x2]``; an empty box is an
    error. Samples without a box pass unchanged, so one pipeline serves queries and database.
    Writes ``img`` (a copy) and ``img_shape``; ``ori_shape`` keeps the loaded size.

    Args:
        bbox_key (str): The results key holding the box.
    """

    def __init__(self, bbox_key: str = 'bbox'):
        self.bbox_key = bbox_key

    def transform(self, results: dict) -> dict:
        box = results.get(self.bbox_key)
        if box is None:
            return results
        box = np.asarray(box, dtype=np.float64).reshape(-1)
        if box.shape != (4, ) or not np.isfinite(box).all():
            raise ValueError(f'CropBBox: {self.bbox_key} of {results.get("img_path")!r} must be '
                             f'4 finite numbers [x1, y1, x2, y2], got {results[self.bbox_key]!r}')
        img = results['img']
        height, width = img.shape[:2]
        x1, y1, x2, y2 = (round(float(v)) for v in box)
        x1, x2 = min(max(x1, 0), width), min(max(x2, 0), width)
        y1, y2 = min(max(y1, 0), height), min(max(y2, 0), height)
        if x2 <= x1 or y2 <= y1:
            raise ValueError(f'CropBBox: box {box.tolist()} of {results.get("img_path")!r} is '
                             f'empty inside the {width} x {height} (w x h) image')
        results['img'] = img[y1:y2, x1:x2].copy()
        results['img_shape'] = (y2 - y1, x2 - x1)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(bbox_key={self.bbox_key!r})'
