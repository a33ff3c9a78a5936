"""Google Landmarks Dataset v2, clean training set (Weyand et al., "Google
Landmarks Dataset v2", CVPR 2020; the "clean" subset of Yokoo et al. 2020)."""
import os.path as osp
from typing import List

from irtbox.registry import DATASETS
from .base_dataset import BaseRetrievalDataset, iter_csv_rows, malformed, parse_int

__all__ = ['gld_image_path', 'GLDv2CleanDataset']

_HEADER = ['landmark_id', 'images']


def gld_image_path(image_id: str) -> str:
    """Where the GLDv2 archives put image ``image_id``:
    ``<id[0]>/<id[1]>/<id[2]>/<id>.jpg``."""
    return osp.join(image_id[0], image_id[1], image_id[2], f'{image_id}.jpg')


@DATASETS.register_module()
class GLDv2CleanDataset(BaseRetrievalDataset):
    """GLDv2-clean: 1,580,470 images of 81,313 landmarks (a training set of
    DToP, Table A6).

    Layout (the official release, https://github.com/cvdfoundation/google-landmark)::

        data_root/
            train_clean.csv          # header "landmark_id,images", then one row per
                                     # landmark: "1,id1 id2 ..." (space-separated ids)
            train/0/0/0/000a1b2c3d4e5f60.jpg   # train/<id[0]>/<id[1]>/<id[2]>/<id>.jpg

    One sample per listed image id, in file order, ``gt_label`` = its
    ``landmark_id`` mapped in increasing order to ``0 .. C-1``
    (``metainfo['classes']`` keeps the ids). An image id listed twice is an
    error naming both lines. Image paths are relative to
    ``data_prefix['img_path']`` (default ``train``).

    Args:
        split (str): ``'train'`` (the only split).
        ann_file (str): ``''`` means ``train_clean.csv``.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    SPLITS = ('train', )
    DEFAULT_IMG_PREFIX = 'train'

    def default_ann_file(self, split):
        return 'train_clean.csv'

    def parse_samples(self) -> List[dict]:
        path = self._require_file(self.ann_file, 'ann_file')
        samples, seen = [], {}
        for lineno, row, line in iter_csv_rows(path, _HEADER):
            landmark = parse_int(path, lineno, row[0].strip(), 'landmark_id', line)
            ids = row[1].split()
            if not ids:
                raise malformed(path, lineno, 'at least one image id after the comma', line)
            for image_id in ids:
                if len(image_id) < 3 or not image_id.isalnum():
                    raise malformed(path, lineno, f'alphanumeric image ids of >= 3 '
                                    f'characters, not {image_id!r},', line)
                if image_id in seen:
                    raise ValueError(f'{path}, line {lineno}: image {image_id!r} is already '
                                     f'listed on line {seen[image_id]}')
                seen[image_id] = lineno
                samples.append(dict(img_path=self._join_img(gld_image_path(image_id)),
                                    gt_label=landmark))
        return samples
