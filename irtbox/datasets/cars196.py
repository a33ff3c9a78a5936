"""Cars196 (Krause et al., "3D Object Representations for Fine-Grained Categorization", 3dRR
2013) with the zero-shot metric-learning split of Song et al. (CVPR 2016)."""
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import BaseRetrievalDataset, check_unique_images, malformed, parse_int
from .miniature import ImageFn, split_by_id, write_image, write_text
from .spec import GB, PML_CHECKSUMS, CountView, DatasetSpec, RemoteFile

__all__ = ['Cars196Dataset', 'write_cars196']

_MAT_FIELDS = ('relative_im_path', 'bbox_x1', 'bbox_y1', 'bbox_x2', 'bbox_y2', 'class')
_CSV_FORMAT = "6 comma-separated fields 'file,x1,y1,x2,y2,class'"
_JKRAUSE = 'http://ai.stanford.edu/~jkrause/car196'

CARS_TRAIN_CLASSES, CARS_CLASSES = 98, 196


def write_cars196(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                  plan: Optional[list] = None) -> None:
    """Both annotation formats of Cars196 over the same images: the devkit's
    ``cars_annos.mat`` with ``car_ims/<n:06d>.jpg``, and the csv mirror
    ``anno_train.csv`` / ``anno_test.csv`` with ``cars_train/`` / ``cars_test/``.

    ``plan``: ``[(class_id, number of images)]``; ids ``1 .. 98`` are the
    retrieval training split, ``99 .. 196`` the test split. The k-th image of
    a class is in the official (classification) test split when k is odd, so
    every class is in both csv files. Every image has a box inside it.
    Default: ids ``1 .. classes`` and ``99 .. 98 + classes``.
    """
    import scipy.io  # only this kind needs scipy
    if plan is None:
        check_int(per_class, 'per_class')
        plan = [(c, per_class) for c in split_by_id(classes, CARS_TRAIN_CLASSES)]
    fields = [*_MAT_FIELDS, 'test']
    rows = [(class_id, k) for class_id, count in plan for k in range(count)]
    annotations = np.zeros((1, len(rows)), dtype=[(f, 'O') for f in fields])
    csv_lines = {0: [], 1: []}  # by the official test flag
    for i, (class_id, k) in enumerate(rows):
        is_test = k % 2
        img = image_fn(class_id, k)
        box = _car_box(i, *img.shape[:2])
        rel = f'car_ims/{i + 1:06d}.jpg'
        write_image(osp.join(root, rel), img)
        # loadmat gives a 1-element string array and 1 x 1 integer arrays for these fields
        annotations[0, i] = (np.array([rel]), *(_mat_uint(v) for v in (*box, class_id, is_test)))
        name = f'{len(csv_lines[is_test]) + 1:05d}.jpg'
        write_image(osp.join(root, 'cars_test' if is_test else 'cars_train', name), img)
        csv_lines[is_test].append(','.join(map(str, (name, *box, class_id))))
    class_names = np.empty((1, CARS_CLASSES), dtype=object)
    for c in range(CARS_CLASSES):
        class_names[0, c] = np.array([f'Make Model {c + 1} 2012'])
    scipy.io.savemat(osp.join(root, 'cars_annos.mat'),
                     dict(annotations=annotations, class_names=class_names))
    write_text(osp.join(root, 'anno_train.csv'), csv_lines[0])
    write_text(osp.join(root, 'anno_test.csv'), csv_lines[1])


def _car_box(index: int, height: int, width: int):
    """A box varying with ``index``, in the devkit's 1-based inclusive pixels,
    inside a ``height`` x ``width`` image."""
    return 1 + index % 3, 2 + index % 2, width - 2 + index % 3, height - 3 + index % 4


def _mat_uint(value: int) -> np.ndarray:
    # The devkit stores small unsigned integers; uint8 holds the class ids and small boxes.
    return np.array([[value]], np.uint8 if value < 256 else np.uint16)


@DATASETS.register_module()
class Cars196Dataset(BaseRetrievalDataset):
    """Stanford Cars split by class: classes 1..98 train (8,054 images), 99..196 test (8,131
    images). The official ``test`` flag (a per-image classification split) is not used.

    Two annotation formats give the same samples (layouts: docs/protocols.md, "Cars196"):
    ``'mat'``, the devkit's ``cars_annos.mat`` (image paths relative to
    ``data_prefix['img_path']``, default ``data_root``), and ``'csv'``, the mirror's
    ``csv_files`` (``file,x1,y1,x2,y2,class``, no header; names relative to their
    ``csv_img_dirs``), both read before the class split.

    Every sample has ``bbox`` = ``[x1 - 1, y1 - 1, x2, y2]`` (0-based, right/bottom exclusive,
    what ``CropBBox`` takes). Labels are the split's class ids mapped in increasing order to
    ``0 .. C-1``; the test split is leave-one-out. An image listed twice is an error.

    Args:
        ann_format (str): ``'mat'``, ``'csv'`` or ``'auto'`` (``'mat'`` when ``ann_file`` exists).
        csv_files (Sequence[str]): The csv files, relative to ``data_root``.
        csv_img_dirs (Sequence[str]): Each csv file's image folder, relative to
            ``data_prefix['img_path']``.
        num_train_classes (int): Classes ``1 .. num_train_classes`` train, the rest test.
        **kwargs: See :class:`BaseRetrievalDataset`; ``ann_file`` defaults to ``cars_annos.mat``.
    """

    specs = (DatasetSpec(
        name='cars196', title='Cars196 (Stanford Cars)',
        homepage='https://ai.stanford.edu/~jkrause/cars/car_dataset.html',
        files=(RemoteFile('cars_annos.mat', f'{_JKRAUSE}/cars_annos.mat',
                          md5='b407c6086d669747186bd1d764ff9dbc', checksum_source=PML_CHECKSUMS,
                          size=400_000, approx=True),
               RemoteFile('car_ims.tgz', f'{_JKRAUSE}/car_ims.tgz',
                          md5='d5c8f0aa497503f355e17dc7886c3f14', checksum_source=PML_CHECKSUMS,
                          size=int(1.9 * GB), unpacked=int(1.9 * GB), approx=True,
                          unpack='tar')),
        views=(CountView('train', dict(type='Cars196Dataset', split='train'), 8_054, 98),
               CountView('test', dict(type='Cars196Dataset', split='test'), 8_131, 98)),
        terms=('Images collected from the web by Krause et al. (3dRR 2013), distributed for '
               'research under the same terms as ImageNet: non-commercial research only.'),
        miniature=write_cars196), )

    FORMATS = ('auto', 'mat', 'csv')
    DEFAULT_ANN_FILE = 'cars_annos.mat'

    def __init__(self,
                 ann_format: str = 'auto',
                 csv_files: Sequence[str] = ('anno_train.csv', 'anno_test.csv'),
                 csv_img_dirs: Sequence[str] = ('cars_train', 'cars_test'),
                 num_train_classes: int = 98,
                 **kwargs):
        if ann_format not in self.FORMATS:
            raise ValueError(f'Cars196Dataset: ann_format must be one of {list(self.FORMATS)}, '
                             f'got {ann_format!r}')
        if len(csv_files) != len(csv_img_dirs):
            raise ValueError(f'Cars196Dataset: csv_files {list(csv_files)} and csv_img_dirs '
                             f'{list(csv_img_dirs)} must have the same length')
        self.ann_format = ann_format
        self.csv_files = tuple(csv_files)
        self.csv_img_dirs = tuple(csv_img_dirs)
        self.num_train_classes = num_train_classes
        super().__init__(**kwargs)

    def resolved_format(self) -> str:
        """The annotation format read: ``ann_format`` with ``'auto'`` resolved."""
        if self.ann_format != 'auto':
            return self.ann_format
        if osp.isfile(self.ann_file):
            return 'mat'
        csv_paths = [self._join_root(f) for f in self.csv_files]
        if all(osp.isfile(p) for p in csv_paths):
            return 'csv'
        raise FileNotFoundError(f'Cars196Dataset: found neither the devkit annotation '
                                f'{self.ann_file!r} nor the csv files {csv_paths} '
                                f'(data_root={self.data_root!r})')

    def parse_samples(self) -> List[dict]:
        rows = self._read_mat() if self.resolved_format() == 'mat' else self._read_csv()
        # Each image once in the whole annotation (the official ones list 16,185 images once).
        check_unique_images((path, where, rel_path, class_id)
                            for (path, where), rel_path, _, class_id in rows)
        samples = []
        for _, rel_path, (x1, y1, x2, y2), class_id in rows:
            if (class_id <= self.num_train_classes) == (self.split == 'train'):
                samples.append(dict(img_path=self._join_img(rel_path), gt_label=class_id,
                                    bbox=[x1 - 1, y1 - 1, x2, y2]))
        return samples

    def _read_mat(self) -> list:
        import scipy.io  # only this format needs scipy
        path = self._require_file(self.ann_file, 'ann_file')
        try:
            mat = scipy.io.loadmat(path)
        except Exception as e:  # scipy raises several types for a bad file
            raise ValueError(f'{path}: not a readable MATLAB file ({e})') from e
        ann = mat.get('annotations')
        names = getattr(getattr(ann, 'dtype', None), 'names', None) or ()
        missing = [f for f in _MAT_FIELDS if f not in names]
        if missing:
            raise ValueError(f"{path}: expected a struct array 'annotations' with the fields "
                             f'{list(_MAT_FIELDS)}; missing {missing}')
        rows = []
        for i, entry in enumerate(ann.reshape(-1)):
            where = f'{path}, annotations[{i}]'
            rel_path = _one_value(entry['relative_im_path'], where, 'relative_im_path')
            if not isinstance(rel_path, str) or not rel_path:
                raise ValueError(f'{where}: expected a path string in relative_im_path, '
                                 f'got {rel_path!r}')
            numbers = [_mat_int(entry[f], where, f) for f in _MAT_FIELDS[1:]]
            rows.append(((path, f'annotations[{i}]'), rel_path, tuple(numbers[:4]), numbers[4]))
        return rows

    def _read_csv(self) -> list:
        rows = []
        for name, img_dir in zip(self.csv_files, self.csv_img_dirs):
            path = self._join_root(name)
            for lineno, line in self._read_lines(path, 'csv_files'):
                fields = [f.strip() for f in line.split(',')]
                if len(fields) != 6 or not fields[0]:
                    raise malformed(path, lineno, _CSV_FORMAT, line)
                numbers = [parse_int(path, lineno, text, what, line)
                           for text, what in zip(fields[1:], ('x1', 'y1', 'x2', 'y2', 'class'))]
                rows.append(((path, lineno), osp.join(img_dir, fields[0]), tuple(numbers[:4]),
                             numbers[4]))
        return rows


def _one_value(value, where: str, field: str):
    arr = np.asarray(value).reshape(-1)
    if arr.size != 1:
        raise ValueError(f'{where}: expected one value in {field}, got {arr.size}')
    return arr[0].item() if isinstance(arr[0], np.generic) else arr[0]


def _mat_int(value, where: str, field: str) -> int:
    x = _one_value(value, where, field)
    if isinstance(x, (bool, str)) or not float(x).is_integer():
        raise ValueError(f'{where}: expected an integer {field}, got {x!r}')
    return int(x)
