"""A user's own data as a folder per class."""
import os
import os.path as osp
from typing import List, Optional, Sequence

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import BaseRetrievalDataset, warn_int_spellings
from .miniature import ImageFn, class_names, write_image
from .spec import DatasetSpec

__all__ = ['FolderDataset', 'write_folder']

IMG_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.ppm', '.pgm', '.tif', '.tiff', '.webp',
                  '.gif')


def write_folder(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                 plan: Optional[dict] = None) -> None:
    """``<split>/<class name>/<class name>_<k>.png``; the second image of every
    class is a ``.jpg``, so that both decoders and suffixes are met.

    ``plan``: ``{split: [(class name, number of images)]}``. Default: ``classes``
    classes in ``train`` and ``classes`` others in ``test``.
    """
    if plan is None:
        check_int(per_class, 'per_class')
        plan = {split: [(name, per_class) for name in names]
                for split, names in class_names(classes).items()}
    class_index = 0
    for split, rows in plan.items():
        for name, count in rows:
            for k in range(count):
                ext = '.jpg' if k == 1 else '.png'
                write_image(osp.join(root, split, name, f'{name}_{k}{ext}'),
                            image_fn(class_index, k))
            class_index += 1


@DATASETS.register_module()
class FolderDataset(BaseRetrievalDataset):
    """Images stored as one folder per class::

        data_root/<split>/<class_name>/**/<image>.jpg   (split given)
        data_root/<class_name>/**/<image>.jpg           (split=None)

    Every class folder (searched recursively) must hold at least one image (``extensions``,
    case-insensitive); other files are ignored. A class is its folder name, a string
    (``05`` and ``5`` are two classes, with a warning). Leave-one-out evaluation.

    Args:
        split (str | None): Sub-folder of ``data_root`` to read (any name),
            or None to read ``data_root`` itself.
        extensions (Sequence[str]): Image file-name endings.
        **kwargs: See :class:`BaseRetrievalDataset`. ``data_prefix`` and ``ann_file`` are not used.
    """

    specs = (DatasetSpec(name='folder', miniature=write_folder), )

    SPLITS = None

    def __init__(self,
                 split: Optional[str] = None,
                 extensions: Sequence[str] = IMG_EXTENSIONS,
                 **kwargs):
        self.extensions = tuple(e.lower() for e in extensions)
        super().__init__(split=split, **kwargs)

    def parse_samples(self) -> List[dict]:
        root = osp.join(self.data_root, self.split) if self.split else self.data_root
        if not osp.isdir(root):
            raise FileNotFoundError(
                f'{type(self).__name__}: folder {root!r} not found '
                f'(data_root={self.data_root!r}, split={self.split!r})')
        class_names = sorted(d.name for d in os.scandir(root) if d.is_dir())
        if not class_names:
            raise ValueError(f'{type(self).__name__}: no class folders in {root!r}')
        warn_int_spellings(((root, f'folder {name!r}', name) for name in class_names),
                           'class folder name', 'if they are one class, put their images in '
                           'one folder')
        samples, empty = [], []
        for name in class_names:
            files = sorted(
                osp.join(dirpath, f)
                for dirpath, _, filenames in os.walk(osp.join(root, name))
                for f in filenames if f.lower().endswith(self.extensions))
            if not files:
                empty.append(name)
            samples.extend(dict(img_path=f, gt_label=name) for f in files)
        if empty:
            raise ValueError(f'{type(self).__name__}: class folders without images '
                             f'({", ".join(self.extensions)}) in {root!r}: {empty}')
        return samples
