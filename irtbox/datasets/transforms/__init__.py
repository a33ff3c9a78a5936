"""Transforms registered in ``irtbox.registry.TRANSFORMS``.

mmcv's transforms (``Resize``, ``RandomFlip``, ``CenterCrop``, ``Normalize``, ...)
live in MMEngine's root registry; importing ``mmcv.transforms`` here registers them,
and the irtbox registry falls back to its parent for them. ``LoadImageFromFile`` is
irtbox's own (:mod:`.loading`: file names in errors, a pixel cap), found first.
"""
import mmcv.transforms  # noqa: F401  (registers mmcv's transforms)

from .formatting import PackRetrievalInputs
from .group_resize import GroupResize
from .loading import ImageLoadError, LoadImageFromFile
from .photometric import RandAugment, RandomIllumination
from .processing import CropBBox, RandomCrop

__all__ = ['CropBBox', 'GroupResize', 'ImageLoadError', 'LoadImageFromFile', 'PackRetrievalInputs',
           'RandAugment', 'RandomCrop', 'RandomIllumination']
