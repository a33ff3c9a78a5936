"""write_miniature: one entry point for every kind of miniature."""
import inspect
import os
from functools import partial
from typing import Optional

from .category import write_cars196, write_cub, write_inat2018, write_inshop, write_sop
from .common import DEFAULT_SIZE, ImageFn, default_image_fn
from .generic import write_csv, write_folder
from .gld import write_gldv1noisy, write_gldv2clean, write_ncclean
from .landmarks import write_revisited, write_revisitop1m, write_sfm120k

__all__ = ['MINIATURE_KINDS', 'write_miniature']

_WRITERS = {
    'sop': write_sop,
    'cub': write_cub,
    'cars196': write_cars196,
    'inshop': write_inshop,
    'inat2018': write_inat2018,
    'sfm120k': write_sfm120k,
    'roxford5k': partial(write_revisited, dataset_name='roxford5k'),
    'rparis6k': partial(write_revisited, dataset_name='rparis6k'),
    'revisitop1m': write_revisitop1m,
    'gldv2clean': write_gldv2clean,
    'gldv1noisy': write_gldv1noisy,
    'ncclean': write_ncclean,
    'folder': write_folder,
    'csv': write_csv,
}
MINIATURE_KINDS = tuple(_WRITERS)


def write_miniature(kind: str, root: str, image_fn: Optional[ImageFn] = None,
                    size: Optional[int] = None, **options) -> str:
    """Write a tiny dataset of ``kind`` in its official layout under ``root``.

    Args:
        kind (str): One of :data:`MINIATURE_KINDS`.
        root (str): The folder to write; it must not exist or be empty (a
            leftover file could become part of the dataset).
        image_fn (Callable | None): ``image_fn(class_index, image_index)``
            returns image ``image_index`` of a class, an H x W x 3 uint8 BGR
            array; what ``class_index`` is, the writer of the kind says
            (``write_<kind>`` in the modules ``category``, ``generic``,
            ``gld`` and ``landmarks`` of this package). None draws
            :func:`~.common.class_image` (class-coloured stripes).
        size (int | None): Side of the default images (``DEFAULT_SIZE`` = 32
            when None); only without ``image_fn``.
        **options: The kind's counts, see its writer: ``classes`` and
            ``per_class`` (all but ``revisitop1m``, which takes ``count``),
            an explicit ``plan`` (the category-level, generic and GLD kinds),
            ``others`` / ``relevance`` (``roxford5k``, ``rparis6k``), ``junk``
            (``csv``), ``missing`` (``gldv1noisy``, ``ncclean``).

    Returns:
        str: ``root``.
    """
    if kind not in _WRITERS:
        raise ValueError(f'write_miniature: unknown kind {kind!r}; expected one of '
                         f'{list(MINIATURE_KINDS)}')
    writer = _WRITERS[kind]
    accepted = [p for p in inspect.signature(writer).parameters
                if p not in ('root', 'image_fn', 'dataset_name')]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f'write_miniature({kind!r}): unknown options {unknown}; '
                        f'this kind takes {accepted}')
    if image_fn is None:
        image_fn = default_image_fn(DEFAULT_SIZE if size is None else size)
    elif size is not None:
        raise ValueError('write_miniature: size sets the default images; image_fn draws its own')
    if os.path.isdir(root) and os.listdir(root):
        raise FileExistsError(f'write_miniature: {root!r} is not empty; a leftover file '
                              'could become part of the dataset')
    writer(root, image_fn, **options)
    return root
