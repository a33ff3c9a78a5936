"""Checks on encoded images before they are decoded: one pixel cap for the whole toolbox.

A 20000 x 20000 PNG is a few kilobytes on disk and 1.2 GB once decoded; the image size is
read from the header (Pillow reads only the header on ``Image.open``) and refused above the
cap before any pixel is decoded. Used by the ``LoadImageFromFile`` transform of the
pipelines and by the search server's uploads.
"""
import io
import os
import struct
import warnings
from typing import Optional, Tuple

__all__ = ['DEFAULT_MAX_PIXELS', 'ImageTooLargeError', 'check_image_bytes', 'default_max_pixels',
           'open_image_unlimited']

# Pillow's own default (Image.MAX_IMAGE_PIXELS): about 89.5 megapixels, e.g. 9459 x 9459.
DEFAULT_MAX_PIXELS = 89_478_485


class ImageTooLargeError(OverflowError):
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
    from PIL import Image
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
    """(width, height) from the header of the encoded image ``data``, decoding no pixels.

    Raises ValueError (empty, or no image header Pillow knows) or :class:`ImageTooLargeError`
    (more than ``max_pixels``, default :func:`default_max_pixels`); the messages say what
    is wrong and leave naming the file to the caller.
    """
    from PIL import Image, UnidentifiedImageError
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
