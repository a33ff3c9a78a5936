"""Google Landmarks Dataset v2, clean training set (Weyand et al., "Google
Landmarks Dataset v2", CVPR 2020; the "clean" subset of Yokoo et al. 2020)."""
import os.path as osp
from typing import List, Optional

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import BaseRetrievalDataset, iter_csv_rows, malformed, parse_int
from .miniature import ImageFn, hex_id, write_image, write_text
from .spec import GB, CountView, DatasetSpec, RemoteFile

__all__ = ['gld_image_path', 'GLDv2CleanDataset', 'write_gldv2clean']

_HEADER = ['landmark_id', 'images']
_GLD = 'https://s3.amazonaws.com/google-landmark'


def gld_image_path(image_id: str) -> str:
    """Where the GLDv2 archives put image ``image_id``:
    ``<id[0]>/<id[1]>/<id[2]>/<id>.jpg``."""
    return osp.join(image_id[0], image_id[1], image_id[2], f'{image_id}.jpg')


def write_gldv2clean(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                     plan: Optional[list] = None) -> None:
    """``train_clean.csv`` (``landmark_id,images``, the ids space-separated) and
    ``train/<id[0]>/<id[1]>/<id[2]>/<id>.jpg``.

    ``plan``: ``[(landmark id, number of images)]``, one csv row each.
    Default: landmarks ``0 .. classes - 1``.
    """
    if plan is None:
        check_int(per_class, 'per_class')
        plan = [(c, per_class) for c in range(check_int(classes, 'classes'))]
    rows = [','.join(_HEADER)]
    for landmark, count in plan:
        ids = [hex_id(f'gldv2-{landmark}-{k}') for k in range(count)]
        for k, image_id in enumerate(ids):
            write_image(osp.join(root, 'train', gld_image_path(image_id)), image_fn(landmark, k))
        rows.append(f'{landmark},{" ".join(ids)}')
    write_text(osp.join(root, 'train_clean.csv'), rows)


@DATASETS.register_module()
class GLDv2CleanDataset(BaseRetrievalDataset):
    """GLDv2-clean: 1,580,470 images of 81,313 landmarks (a training set of DToP, Table A6).

    Layout (the official release, https://github.com/cvdfoundation/google-landmark)::

        data_root/
            train_clean.csv          # header "landmark_id,images", then one row per
                                     # landmark: "1,id1 id2 ..." (space-separated ids)
            train/0/0/0/000a1b2c3d4e5f60.jpg   # train/<id[0]>/<id[1]>/<id[2]>/<id>.jpg

    One sample per listed image id, in file order, labelled by its ``landmark_id``; a
    repeated id is an error.

    Args:
        split (str): ``'train'`` (the only split).
        ann_file (str): ``''`` means ``train_clean.csv``.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    specs = (DatasetSpec(
        name='gldv2clean', title='Google Landmarks Dataset v2, clean training set',
        homepage='https://github.com/cvdfoundation/google-landmark',
        files=(RemoteFile('train_clean.csv', f'{_GLD}/metadata/train_clean.csv',
                          size=30_000_000, approx=True),
               *(RemoteFile(f'images_{k:03d}.tar', f'{_GLD}/train/images_{k:03d}.tar',
                            md5_url=f'{_GLD}/md5sum/train/md5.images_{k:03d}.txt',
                            checksum_source='the md5sum files of the GLDv2 release',
                            size=1 * GB, approx=True, unpack='tar', dest='train')
                 for k in range(500))),
        views=(CountView('train', dict(type='GLDv2CleanDataset'), 1_580_470, 81_313), ),
        terms=('Annotations: CC BY 4.0 (Google). Train images: Creative Commons BY licences '
               'of their owners, listed per image in train_attribution.csv; Google makes no '
               'warranty on the licence of each image.'),
        miniature=write_gldv2clean), )

    SPLITS = ('train', )
    DEFAULT_IMG_PREFIX = 'train'
    DEFAULT_ANN_FILE = 'train_clean.csv'

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
