"""Google Landmarks Dataset v1, the noisy training set of the Kaggle 2018
landmark recognition challenge (Noh et al., "Large-Scale Image Retrieval with
Attentive Deep Local Features", ICCV 2017)."""
import os.path as osp
from typing import Collection, List, Optional

from mmengine.logging import print_log

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import (BaseRetrievalDataset, check_unique_images, iter_csv_rows, malformed,
                           parse_int)
from .miniature import ImageFn, hex_id, interleaved, write_image, write_text
from .spec import GB, CountView, DatasetSpec, RemoteFile

__all__ = ['drop_missing_images', 'GLDv1NoisyDataset', 'write_gldv1noisy']

_HEADER = ['id', 'url', 'landmark_id']


def drop_missing_images(samples: List[dict]) -> List[dict]:
    """The samples whose ``img_path`` exists; logs how many were dropped and the first
    missing path. (URL lists are never fully downloadable: dead links.)"""
    kept, missing = [], []
    for s in samples:
        (kept if osp.isfile(s['img_path']) else missing).append(s)
    if missing:
        print_log(f'skipped {len(missing)} of {len(samples)} listed images whose file is '
                  f"missing (skip_missing=True), e.g. {missing[0]['img_path']}",
                  logger='current')
    return kept


def write_gldv1noisy(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                     plan: Optional[list] = None, missing: Collection[int] = ()) -> None:
    """``train.csv`` (quoted ``"id","url","landmark_id"``, as the Kaggle 2018
    file) and ``train/<id>.jpg``.

    ``plan``: the landmark id of each row, in file order. ``missing``: rows
    whose image is not written (dead URLs; configs read them with ``skip_missing=True``). Default:
    landmarks ``0 .. classes - 1``, their rows interleaved.
    """
    if plan is None:
        plan = interleaved(range(check_int(classes, 'classes')), per_class)
    rows, seen = ['"id","url","landmark_id"'], {}
    for row, landmark in enumerate(plan):
        image_id = hex_id(f'gldv1-{row}')
        rows.append(f'"{image_id}","https://lh3.googleusercontent.com/-{image_id}/s1600/",'
                    f'"{landmark}"')
        k = seen[landmark] = seen.get(landmark, -1) + 1
        if row not in missing:
            write_image(osp.join(root, 'train', f'{image_id}.jpg'), image_fn(landmark, k))
    write_text(osp.join(root, 'train.csv'), rows)


@DATASETS.register_module()
class GLDv1NoisyDataset(BaseRetrievalDataset):
    """GLDv1-noisy: 1,225,029 images of 14,951 landmarks, the ``train.csv`` of the Kaggle "Google
    Landmark Recognition Challenge" 2018 (a training set of DToP, Table A6). The images are given as
    URLs; the challenge's download script saves each as ``<id>.jpg`` in one folder.

    Layout::

        data_root/
            train.csv                # header "id,url,landmark_id" (fields may be
                                     # quoted), then "<16-hex id>,<url>,<int>"
            train/<id>.jpg

    One sample per row, in file order, labelled by ``landmark_id`` (an integer); a repeated
    ``id`` is an error. The format: the Kaggle challenge's dataset card and the GLDv2
    repository (https://github.com/cvdfoundation/google-landmark), which keeps these columns.

    Args:
        split (str): ``'train'`` (the only split).
        ann_file (str): ``''`` means ``train.csv``.
        data_prefix (dict | None): ``dict(img_path=...)``, default ``train``.
        skip_missing (bool): Drop rows whose image file does not exist
            (dead URLs) instead of failing when the image is loaded.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    specs = (DatasetSpec(
        name='gldv1noisy',
        title='Google Landmarks Dataset v1 (Kaggle 2018), noisy training set',
        homepage='https://www.kaggle.com/c/landmark-recognition-challenge',
        files=(RemoteFile('train.csv', size=190_000_000, approx=True),
               RemoteFile('train', folder=True, size=0, unpacked=500 * GB, approx=True,
                          optional=True)),
        views=(CountView('train', dict(type='GLDv1NoisyDataset', skip_missing=True),
                         1_225_029, 14_951, exact=False), ),
        terms=('The rules of the Kaggle "Google Landmark Recognition Challenge" (2018), which '
               'you accept on its page; images are web URLs whose licences vary. Google '
               'no longer distributes GLDv1.'),
        manual=('Sign in to Kaggle, accept the rules of the "Google Landmark Recognition '
                'Challenge" (2018) and download train.csv; fetch the images by URL with the '
                "challenge's script into a folder train/ (<id>.jpg); put train.csv and "
                'train/ in one folder and pass it as from_dir (train/ is linked, not '
                'copied). Many URLs are dead: configs read it with skip_missing=True.'),
        miniature=write_gldv1noisy), )

    SPLITS = ('train', )
    DEFAULT_IMG_PREFIX = 'train'
    DEFAULT_ANN_FILE = 'train.csv'

    def __init__(self, split: str = 'train', skip_missing: bool = False, **kwargs):
        self.skip_missing = bool(skip_missing)
        super().__init__(split=split, **kwargs)

    def parse_samples(self) -> List[dict]:
        path = self._require_file(self.ann_file, 'ann_file')
        samples, entries = [], []
        for lineno, row, line in iter_csv_rows(path, _HEADER):
            image_id = row[0].strip()
            if not image_id.isalnum():
                raise malformed(path, lineno, 'an alphanumeric image id', line)
            landmark = parse_int(path, lineno, row[2].strip(), 'landmark_id', line)
            entries.append((path, lineno, f'{image_id}.jpg', landmark))
            samples.append(dict(img_path=self._join_img(f'{image_id}.jpg'),
                                gt_label=landmark))
        check_unique_images(entries)
        if self.skip_missing:
            samples = drop_missing_images(samples)
        return samples
