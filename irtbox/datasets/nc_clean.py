"""NC-clean: the Landmarks dataset of "Neural Codes" (Babenko et al., ECCV
2014) cleaned by Gordo et al. ("Deep Image Retrieval: Learning Global
Representations for Image Search", ECCV 2016)."""
import os.path as osp
from typing import List
from urllib.parse import unquote, urlsplit

from irtbox.registry import DATASETS
from .base_dataset import (BaseRetrievalDataset, check_int_spellings, check_unique_images,
                           is_int_text, malformed)
from .gldv1 import drop_missing_images

__all__ = ['NCCleanDataset']


def _label_key(text: str):
    # Integer labels sort numerically, others as strings (BaseRetrievalDataset).
    return int(text) if is_int_text(text) else text


@DATASETS.register_module()
class NCCleanDataset(BaseRetrievalDataset):
    """NC-clean (Landmarks-clean): 27,965 images of 581 landmarks in the
    copy used by DToP (Table A6; the list names more images, some URLs are
    dead).

    Layout (the lists released by Gordo et al., read the same way by
    naver/deep-image-retrieval's ``Landmarks_clean``)::

        data_root/
            annotation_clean_train.txt   # one image per line: "<url or path> <label>"
            annotation_clean_val.txt
            images/<file name of the url>

    Each line has exactly two space-separated fields. The first is the
    image's URL or its path: for a URL (``scheme://...``) the image file is
    the last component of the URL's path (the name the downloaders save it
    under), otherwise the path itself, relative to ``data_prefix['img_path']``
    (default ``images``). The second is the landmark label, an integer or a
    name; labels are sorted (integers numerically, before names) and mapped
    to ``0 .. C-1``. One integer written two ways (``05`` and ``5``) is an
    error naming both lines (one class or two cannot be told). An image
    listed twice (also two URLs with one file name) is an error naming both
    lines.

    Args:
        split (str): ``'train'`` or ``'val'``.
        ann_file (str): ``''`` means ``annotation_clean_{split}.txt``.
        data_prefix (dict | None): ``dict(img_path=...)``, default ``images``.
        skip_missing (bool): Drop lines whose image file does not exist
            (dead URLs) instead of failing when the image is loaded.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    SPLITS = ('train', 'val')
    DEFAULT_IMG_PREFIX = 'images'

    def __init__(self, split: str = 'train', skip_missing: bool = False, **kwargs):
        self.skip_missing = bool(skip_missing)
        super().__init__(split=split, **kwargs)

    def default_ann_file(self, split):
        return f'annotation_clean_{split}.txt'

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        samples, entries = [], []
        for lineno, line in self._read_lines(path, 'ann_file'):
            fields = line.split()
            if len(fields) != 2:
                raise malformed(path, lineno, '2 space-separated fields "<url or path> <label>"',
                                line)
            location, label = fields
            if '://' in location:
                name = osp.basename(unquote(urlsplit(location).path))
                if not name:
                    raise malformed(path, lineno, 'a URL ending with a file name', line)
                location = name
            entries.append((path, lineno, location, label))
            samples.append(dict(img_path=self._join_img(location), gt_label=_label_key(label)))
        check_unique_images(entries)
        check_int_spellings(((p, n, label) for p, n, _, label in entries), 'label',
                            'one class or two cannot be told')
        if self.skip_missing:
            samples = drop_missing_images(samples)
        return samples
