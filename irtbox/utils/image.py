"""One image decoder for the whole toolbox, and one pixel cap checked before it decodes. A 20000 x
20000 PNG is a few kilobytes on disk and 1.2 GB once decoded, so the size is read from the header
and refused above the cap before any pixel is decoded. :func:`decode_image` is the only place an
image file becomes pixels (the pipelines' ``LoadImageFromFile`` and the search server's uploads), so
a file gives the same pixels everywhere."""
import io
import os
import struct
import warnings
from typing import Callable, Optional, Tuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .errors import ArgumentError, IrtboxError

__all__ = ['DEFAULT_MAX_PIXELS', 'ImageTooLargeError', 'check_image_bytes', 'decode_image',
           'default_max_pixels', 'open_image_unlimited']

# Pillow's own default (Image.MAX_IMAGE_PIXELS): about 89.5 megapixels, e.g. 9459 x 9459.
DEFAULT_MAX_PIXELS = 89_478_485


class ImageTooLargeError(IrtboxError, OverflowError):
    """An image with more pixels than the cap allows."""


def default_max_pixels() -> int:
    """The pixel cap: ``$IRTBOX_MAX_IMAGE_PIXELS`` when set, else :data:`DEFAULT_MAX_PIXELS`."""
    value = os.environ.get('IRTBOX_MAX_IMAGE_PIXELS')
    if value is None:
        return DEFAULT_MAX_PIXELS
    try:
        return int(float(value))
    except ValueError:
        raise ValueError(
            f'IRTBOX_MAX_IMAGE_PIXELS={value!r}: expected a number of pixels') from None


def open_image_unlimited(data: bytes):
    """``data`` opened as ``Image.open`` opens it (its format's plugin reads the header; no
    pixel is decoded yet), without Pillow's decompression-bomb check, which is process-wide
    (``Image.MAX_IMAGE_PIXELS``) and left unchanged: the caller checks the size against its
    own limit. ValueError when no image format recognises the header."""
    Image.init()
    for name in Image.ID:
        factory, accept = Image.OPEN[name]
        if accept is not None and not accept(data[:16]):
            continue
        try:
            return factory(io.BytesIO(data), None)
        except (SyntaxError, OSError, ValueError, IndexError, TypeError, struct.error):
            continue
    raise ValueError('not an image (no image format recognises its header)')


def check_image_bytes(data: bytes, max_pixels: Optional[int] = None) -> Tuple[int, int]:
    """(width, height) from the header of the encoded image ``data``, decoding no pixels. Raises
    ValueError (empty, or no image header Pillow knows) or :class:`ImageTooLargeError` (more than
    ``max_pixels``, default :func:`default_max_pixels`); the messages say what is wrong and leave
    naming the file to the caller."""
    max_pixels = default_max_pixels() if max_pixels is None else max_pixels
    if not data:
        raise ValueError('empty file (0 bytes)')
    try:
        with warnings.catch_warnings():  # Pillow's bomb warning: the cap below decides
            warnings.simplefilter('ignore', Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
    except Image.DecompressionBombError:
        # Pillow refuses sizes above twice its own limit without giving them: read the
        # header through its format plugins directly, as Image.open does.
        with open_image_unlimited(data) as image:
            width, height = image.size
    except UnidentifiedImageError:  # its message names Pillow's BytesIO object: not said
        raise ValueError('not an image (no image format Pillow reads recognises its '
                         'header)') from None
    except (OSError, ValueError, SyntaxError) as err:
        raise ValueError(f'not an image (its header cannot be read: {err})') from None
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f'the image is {width} x {height} = {width * height / 1e6:.1f} megapixels; the '
            f'limit is {max_pixels / 1e6:.1f}')
    return width, height


def decode_image(data: bytes, max_pixels: Optional[int] = None, channel_order: str = 'rgb',
                 min_side: Optional[int] = None,
                 reserve: Optional[Callable[[int], None]] = None) -> np.ndarray:
    """The encoded image ``data`` as an H x W x 3 uint8 array (``channel_order`` ``'rgb'`` or
    ``'bgr'``), the same pixels for every caller:

    - the EXIF orientation is applied (a phone photo stored rotated comes out upright);
    - 16-bit images keep their range (the high byte, as 8 bits), not clipped at 255;
    - CMYK, palette, grey, 1-bit and alpha images become RGB (alpha is dropped, as OpenCV
      and mmcv do);
    - an animated GIF, PNG or WebP gives its first frame.

    The size is checked against ``max_pixels`` from the header first
    (:func:`check_image_bytes`); an undecodable file raises ValueError saying why.
    ``min_side``: the short side the caller needs; a larger image is decoded smaller, by the
    largest whole factor that keeps it (the search server's queries). ``reserve(pixels)`` is
    called with the pixels about to be decoded, and again with the result's (a memory budget)."""
    if channel_order not in ('rgb', 'bgr'):
        raise ArgumentError(f"channel_order={channel_order!r}: expected 'rgb' or 'bgr'",
                            'channel_order')
    check_image_bytes(data, max_pixels)
    try:
        with open_image_unlimited(data) as image:
            width, height = image.size
            if min_side and min(width, height) > min_side and image.format == 'JPEG':
                scale = min_side / min(width, height)
                image.draft('RGB', (max(1, int(width * scale)), max(1, int(height * scale))))
            if reserve is not None:
                reserve(image.size[0] * image.size[1])
            image.seek(0)  # an animation's first frame
            image.load()
            # Reduced before anything else is made of it: the full-size pixels are held once.
            factor = min(image.size) // min_side if min_side else 1
            if factor >= 2:
                try:
                    image = image.reduce(factor)
                except ValueError:  # a mode reduce does not take (e.g. palette): as RGB
                    image = image.convert('RGB').reduce(factor)
            if reserve is not None:
                reserve(image.size[0] * image.size[1])
            ImageOps.exif_transpose(image, in_place=True)
            pixels = _as_rgb(image)
    except (OSError, ValueError, EOFError, SyntaxError, Image.DecompressionBombError) as err:
        raise ValueError(f'the image cannot be decoded ({err})') from None
    if channel_order == 'bgr':
        pixels = np.ascontiguousarray(pixels[..., ::-1])
    return pixels


def _as_rgb(image) -> np.ndarray:
    """A loaded Pillow image as H x W x 3 uint8 RGB; 16-bit grey keeps its range (Pillow's
    ``convert('RGB')`` clips it at 255)."""
    if image.mode in ('I;16', 'I;16L', 'I;16B', 'I;16N', 'I'):
        # 'I' is how Pillow opens 16-bit grey PNGs: values up to 65535 in 32 bits.
        grey = np.asarray(image).astype(np.int64)
        grey = (np.clip(grey, 0, 65535) >> 8).astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=2)
    return np.asarray(image.convert('RGB'))
