"""What the miniature writers beside each dataset class share: the default images and writing
files (:mod:`irtbox.ops.miniature` picks a kind's writer)."""
import hashlib
import os
import os.path as osp
import pickle
from typing import Callable, Iterable, Sequence

import cv2
import numpy as np

from irtbox.utils.checks import check_int

__all__ = ['DEFAULT_SIZE', 'ImageFn', 'class_image', 'class_names', 'hex_id',
           'interleaved', 'split_by_id', 'write_image', 'write_pickle', 'write_text']

# image_fn(class_index, image_index) -> H x W x 3 uint8 BGR image
ImageFn = Callable[[int, int], np.ndarray]

DEFAULT_SIZE = 32  # side of the default images, in pixels
# Independent random streams: the class's look never depends on which image is drawn.
_CLASS_STREAM, _IMAGE_STREAM = 0, 1
_JPEG_PARAMS = [cv2.IMWRITE_JPEG_QUALITY, 90, cv2.IMWRITE_JPEG_OPTIMIZE, 1]
_PNG_PARAMS = [cv2.IMWRITE_PNG_COMPRESSION, 9]


def class_image(class_index: int, image_index: int, size: int = DEFAULT_SIZE) -> np.ndarray:
    """A ``size`` x ``size`` x 3 uint8 BGR image of class ``class_index``.

    The class fixes two colours and the orientation and period of stripes drawn in them; each image
    shifts and slightly turns the stripes and changes brightness and noise. So images of a class
    look alike, classes differ, and a model can learn to tell them apart. Deterministic in its
    arguments (non-negative ints).
    """
    look = np.random.default_rng([_CLASS_STREAM, int(class_index)])
    jitter = np.random.default_rng([_IMAGE_STREAM, int(class_index), int(image_index)])
    dark, light = look.uniform(0, 128, 3), look.uniform(128, 256, 3)
    angle = look.uniform(0, np.pi) + jitter.normal(0, 0.1)
    period = look.uniform(0.25, 0.6) * size
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    phase = jitter.uniform(0, 2 * np.pi)
    wave = 0.5 + 0.5 * np.sin(2 * np.pi * (x * np.cos(angle) + y * np.sin(angle)) / period + phase)
    img = dark + (light - dark) * wave[..., None]
    img = img * jitter.uniform(0.85, 1.15) + jitter.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_image(path: str, img: np.ndarray) -> None:
    """Encode ``img`` (BGR) as PNG for a ``.png`` path, else as JPEG (SfM-120k's
    images have no extension), creating the folder."""
    is_png = path.lower().endswith('.png')
    ok, data = cv2.imencode('.png' if is_png else '.jpg', img,
                            _PNG_PARAMS if is_png else _JPEG_PARAMS)
    if not ok:
        raise OSError(f'could not encode the image for {path}')
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:  # not cv2.imwrite: it picks the codec by extension
        f.write(data.tobytes())


def write_text(path: str, lines: Iterable[str]) -> None:
    """Write ``lines`` as a UTF-8 text file, each ended by a newline."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
        f.write(''.join(f'{line}\n' for line in lines))


def write_pickle(path: str, obj) -> None:
    """Pickle ``obj`` with a fixed protocol (the same bytes whatever Python's default)."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        pickle.dump(obj, f, protocol=4)


def split_by_id(classes: int, train_classes: int) -> list:
    """Class ids ``1 .. classes`` (training split) and ``train_classes + 1 ..
    train_classes + classes`` (test split), for datasets split by class id."""
    check_int(classes, 'classes', maximum=train_classes)
    return [*range(1, classes + 1), *range(train_classes + 1, train_classes + classes + 1)]


def hex_id(text: str) -> str:
    """A 16-hex id like the GLD ones, stable for ``text``."""
    return hashlib.md5(text.encode()).hexdigest()[:16]


def interleaved(labels: Sequence, per_class: int) -> list:
    """``per_class`` rows of every label, the classes taking turns (as in a shuffled list:
    nothing may rely on the rows of a class being together)."""
    check_int(per_class, 'per_class')
    return [label for _ in range(per_class) for label in labels]


def class_names(classes: int) -> dict:
    """``{split: [class name]}``: ``classes`` names for ``train`` and as many others for
    ``test``."""
    check_int(classes, 'classes')
    return {split: [f'class_{c:03d}' for c in range(s * classes, (s + 1) * classes)]
            for s, split in enumerate(('train', 'test'))}
