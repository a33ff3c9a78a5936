"""Resizing every image to the size of its aspect-ratio group (group-size
sampling, Yokoo et al. 2020)."""
import math
from typing import Optional, Sequence, Tuple

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmcv.transforms.utils import cache_randomness

from irtbox.registry import TRANSFORMS
from ..samplers.group_size import (DEFAULT_ASPECT_BINS, DEFAULT_GROUP_SIZES, aspect_group,
                                   check_aspect_bins, check_group_sizes)

__all__ = ['GroupResize']


@TRANSFORMS.register_module()
class GroupResize(BaseTransform):
    """Resize ``results['img']`` to the (width, height) of its image's aspect-ratio group: the
    transform half of group-size sampling (Yokoo et al., CVPRW 2020; DToP Table A12).

    The group is :func:`~irtbox.datasets.samplers.group_size.aspect_group` of the
    *original* image size, as :class:`GroupSizeSampler` groups (``results['width']`` /
    ``['height']``, else ``ori_shape``), so earlier transforms (``CropBBox``) do not change
    it, and with the sampler a whole batch comes out at one size.

    ``crop_scale=(a, b)`` first crops a random window of the image's aspect ratio and a
    fraction s ~ U(a, b) of its area: crop and scale augmentation at the group's size.

    Reads ``img`` (H x W [x C]) and the size keys above; writes ``img`` (h x w [x C] with (w, h) the
    group's size), ``img_shape`` = (h, w) and ``size_group`` (the group index).

    Args:
        aspect_bins (Sequence[float]): Increasing bins of h / w; must match the sampler's.
        sizes (Sequence[tuple[int, int]]): One (width, height) per group,
            from the widest group to the tallest. Defaults to Yokoo et al.:
            (512, 352), (512, 384), (448, 448), (384, 512), (352, 512).
        crop_scale (tuple[float, float] | None): Area fraction range of the
            random crop, 0 < a <= b <= 1; None (default) resizes the whole
            image.
        interpolation (str): mmcv interpolation ('bilinear', 'area', ...).
    """

    def __init__(self,
                 aspect_bins: Sequence[float] = DEFAULT_ASPECT_BINS,
                 sizes: Sequence[Sequence[int]] = DEFAULT_GROUP_SIZES,
                 crop_scale: Optional[Sequence[float]] = None,
                 interpolation: str = 'bilinear'):
        name = type(self).__name__
        self.aspect_bins = check_aspect_bins(aspect_bins, name)
        try:
            self.sizes = check_group_sizes(sizes, len(self.aspect_bins) + 1)
        except ValueError as err:
            raise ValueError(f'{name}: {err}') from err
        if crop_scale is not None:
            crop_scale = tuple(float(s) for s in crop_scale)
            if len(crop_scale) != 2 or not 0 < crop_scale[0] <= crop_scale[1] <= 1:
                raise ValueError(f'{name}: crop_scale must be (a, b) with 0 < a <= b <= 1, '
                                 f'got {crop_scale!r}')
        self.crop_scale = crop_scale
        self.interpolation = interpolation

    def group_of(self, results: dict) -> int:
        """The group of the sample's original image (see the class doc)."""
        if results.get('width') is not None and results.get('height') is not None:
            height, width = results['height'], results['width']
        elif results.get('ori_shape') is not None:
            height, width = results['ori_shape'][:2]
        else:
            raise KeyError(f"GroupResize: {results.get('img_path')!r} has neither 'width'/"
                           "'height' nor 'ori_shape'; load the image with LoadImageFromFile "
                           'first')
        return int(aspect_group(height, width, self.aspect_bins))

    @cache_randomness
    def _window(self, height: int, width: int) -> Tuple[int, int, int, int]:
        side = math.sqrt(np.random.uniform(*self.crop_scale))
        h, w = max(1, round(height * side)), max(1, round(width * side))
        return np.random.randint(0, height - h + 1), np.random.randint(0, width - w + 1), h, w

    def transform(self, results: dict) -> dict:
        group = self.group_of(results)
        img = results['img']
        if self.crop_scale is not None:
            y, x, h, w = self._window(*img.shape[:2])
            img = img[y:y + h, x:x + w]
        width, height = self.sizes[group]
        results['img'] = mmcv.imresize(img, (width, height), interpolation=self.interpolation)
        results['img_shape'] = (height, width)
        results['size_group'] = group
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(aspect_bins={self.aspect_bins}, sizes={self.sizes}, '
                f'crop_scale={self.crop_scale}, interpolation={self.interpolation!r})')
