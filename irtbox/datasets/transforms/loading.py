"""``LoadImageFromFile`` that names the file of every image it cannot load, and caps pixels."""
from typing import Optional

import mmcv
import numpy as np
from mmcv.transforms import LoadImageFromFile as MMCVLoadImageFromFile
from mmengine import fileio

from irtbox.registry import TRANSFORMS
from irtbox.utils.image import decode_image, default_max_pixels
from irtbox.utils.errors import IrtboxError

__all__ = ['ImageLoadError', 'LoadImageFromFile']


class ImageLoadError(IrtboxError, ValueError):
    """An image file that cannot be loaded: empty, truncated, not an image, or too large."""


@TRANSFORMS.register_module()
class LoadImageFromFile(MMCVLoadImageFromFile):
    """mmcv's ``LoadImageFromFile`` (same arguments and results) that checks the file first
    and decodes it with :func:`irtbox.utils.image.decode_image`, the decoder of every image
    irtbox reads (the search server's uploads too): EXIF orientation applied, 16-bit kept
    in range, CMYK and palette as RGB, an animation's first frame.

    Under ``default_scope='irtbox'`` it replaces mmcv's transform of the same name. An image
    over ``max_pixels`` is refused from its header, before decoding; an empty, truncated or
    undecodable file raises :class:`ImageLoadError` naming it.

    Args:
        max_pixels (int, optional): the pixel cap. Default: ``$IRTBOX_MAX_IMAGE_PIXELS``,
            else 89,478,485 (Pillow's default limit).
        **kwargs: mmcv's ``LoadImageFromFile`` arguments (``ignore_empty=True`` still turns
            an unloadable image into a skipped sample, as in mmcv).
    """

    def __init__(self, max_pixels: Optional[int] = None, **kwargs):
        super().__init__(**kwargs)
        if self.color_type not in ('color', 'grayscale'):
            raise ValueError(f"LoadImageFromFile: color_type={self.color_type!r}: irtbox "
                             "decodes 'color' (3 channels) or 'grayscale'")
        self.max_pixels = max_pixels

    def transform(self, results: dict) -> Optional[dict]:
        """Load ``results['img_path']`` into ``results['img']`` (with img_shape, ori_shape)."""
        filename = results['img_path']
        try:
            img = self._load(filename)
        except ImageLoadError:
            if self.ignore_empty:
                return None
            raise
        if self.to_float32:
            img = img.astype(np.float32)
        results['img'] = img
        results['img_shape'] = img.shape[:2]
        results['ori_shape'] = img.shape[:2]
        return results

    def _load(self, filename: str) -> np.ndarray:
        try:
            data = fileio.get(filename, backend_args=self.backend_args)
        except OSError as err:
            raise ImageLoadError(f'{filename}: cannot read the image file ({err})') from err
        max_pixels = default_max_pixels() if self.max_pixels is None else self.max_pixels
        try:
            img = decode_image(data, max_pixels, 'bgr')  # mmcv's order
        except OverflowError as err:
            raise ImageLoadError(f'{filename}: {err} (max_pixels of LoadImageFromFile or '
                                 'IRTBOX_MAX_IMAGE_PIXELS to raise it)') from None
        except ValueError as err:
            raise ImageLoadError(f'{filename}: {err}') from None
        if self.color_type == 'grayscale':
            img = mmcv.bgr2gray(img)
        return img
