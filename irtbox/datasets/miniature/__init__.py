"""Miniatures: tiny datasets written in the official file layout of each dataset
irtbox reads, so that any config can run end to end in seconds (and tests have
fixtures).

- :func:`write_miniature` ``(kind, root, image_fn=None, **options)`` writes one with
  the writer its dataset class declares (the ``miniature`` of its spec,
  :mod:`irtbox.datasets.spec`); ``irtbox.datasets.MINIATURE_KINDS`` lists the
  built-in kinds;
- :func:`miniature_kind` / :func:`miniature_kinds` say which kinds a dataset
  config reads; :func:`point_at_miniature` points it at a written root.

By default every split has 8 classes of 4 images of 32 x 32 pixels (class-
coloured stripes, see :func:`class_image`): enough for M-per-class batches
of 8 with m = 4, group-size batches of 8, tuple mining with up to 7
negatives, and query / gallery splits with both in every class.
"""
from .common import ImageFn, class_image
from .configs import miniature_kind, miniature_kinds, point_at_miniature
from .write import write_miniature

__all__ = ['ImageFn', 'class_image', 'miniature_kind', 'miniature_kinds', 'point_at_miniature',
           'write_miniature']
