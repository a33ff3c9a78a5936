"""write_miniature: one entry point for every kind of miniature."""
import inspect
from functools import partial
import os
from typing import Optional

from ..spec import dataset_specs
from irtbox.utils.checks import check_int
from .common import DEFAULT_SIZE, ImageFn, class_image

__all__ = ['write_miniature']


def write_miniature(kind: str, root: str, image_fn: Optional[ImageFn] = None,
                    size: Optional[int] = None, **options) -> str:
    """Write a tiny dataset of ``kind`` in its official layout under ``root``.

    Args:
        kind (str): The name of a dataset spec with a miniature (the built-in ones:
            :data:`irtbox.datasets.MINIATURE_KINDS`).
        root (str): The folder to write; it must not exist or be empty (a
            leftover file could become part of the dataset).
        image_fn (Callable | None): ``image_fn(class_index, image_index)``
            returns image ``image_index`` of a class, an H x W x 3 uint8 BGR
            array; what ``class_index`` is, the writer of the kind says
            (the spec's ``miniature``, ``write_<kind>`` in the dataset's
            module). None draws :func:`~.common.class_image` (class-coloured
            stripes).
        size (int | None): Side of the default images (``DEFAULT_SIZE`` = 32
            when None); only without ``image_fn``.
        **options: The arguments of the kind's writer: mostly ``classes``
            and ``per_class``, or an explicit ``plan``.

    Returns:
        str: ``root``.
    """
    writers = {name: spec.miniature for name, spec in dataset_specs().items() if spec.miniature}
    if kind not in writers:
        raise ValueError(f'write_miniature: unknown kind {kind!r}; expected one of '
                         f'{list(writers)}')
    writer = writers[kind]
    bound = getattr(writer, 'keywords', {})  # a functools.partial's (roxford5k's dataset_name)
    accepted = [p for p in inspect.signature(writer).parameters
                if p not in ('root', 'image_fn', *bound)]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f'write_miniature({kind!r}): unknown options {unknown}; '
                        f'this kind takes {accepted}')
    if image_fn is None:
        size = check_int(DEFAULT_SIZE if size is None else size, 'size', 8)
        image_fn = partial(class_image, size=size)
    elif size is not None:
        raise ValueError('write_miniature: size sets the default images; image_fn draws its own')
    if os.path.isdir(root) and os.listdir(root):
        raise FileExistsError(f'write_miniature: {root!r} is not empty; a leftover file '
                              'could become part of the dataset')
    writer(root, image_fn, **options)
    return root
