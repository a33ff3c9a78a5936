"""CUB-200-2011 (Wah et al., Caltech-UCSD Birds-200-2011, 2011) with the
zero-shot metric-learning split of Song et al. (CVPR 2016)."""
import os.path as osp
from typing import List, Optional

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import BaseRetrievalDataset, check_unique_images, malformed, parse_int
from .miniature import ImageFn, split_by_id, write_image, write_text
from .spec import GB, CountView, DatasetSpec, RemoteFile

__all__ = ['CUBDataset', 'write_cub']

CUB_TRAIN_CLASSES = 100  # CUBDataset's num_train_classes: ids above it are the test split


def write_cub(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
              plan: Optional[list] = None) -> None:
    """``images.txt``, ``image_class_labels.txt`` and
    ``images/<id:03d>.<name>/<name>_<k:04d>_<n>.jpg``.

    ``plan``: ``[(class_id, name, number of images)]``; ids ``1 .. 100`` are the
    training split, ``101 .. 200`` the test split. Default: ids
    ``1 .. classes`` and ``101 .. 100 + classes``.
    """
    if plan is None:
        check_int(per_class, 'per_class')
        plan = [(c, f'Species_{c:03d}', per_class)
                for c in split_by_id(classes, CUB_TRAIN_CLASSES)]
    images, labels = [], []
    for class_id, name, count in plan:
        for k in range(count):
            image_id = len(images) + 1
            rel = f'{class_id:03d}.{name}/{name}_{k + 1:04d}_{100 + image_id}.jpg'
            write_image(osp.join(root, 'images', rel), image_fn(class_id, k))
            images.append(f'{image_id} {rel}')
            labels.append(f'{image_id} {class_id}')
    write_text(osp.join(root, 'images.txt'), images)
    write_text(osp.join(root, 'image_class_labels.txt'), labels)


@DATASETS.register_module()
class CUBDataset(BaseRetrievalDataset):
    """CUB-200-2011 split by class: classes 1..100 train (5,864 images), 101..200 test (5,924
    images). The official ``train_test_split.txt`` is *not* used (it splits the images of every
    class, which suits classification, not retrieval of unseen classes).

    Layout (the official release)::

        data_root/
            images.txt               # "image_id path", path under images/
            image_class_labels.txt   # "image_id class_id", class_id 1..200
            images/001.Black_footed_Albatross/Black_Footed_Albatross_0046_18.jpg

    The label is the integer class id; the test split is evaluated leave-one-out. A repeated
    image is an error.

    Args:
        label_file (str): The image-to-class file, relative to ``data_root``.
        num_train_classes (int): Classes ``1 .. num_train_classes`` form the
            training split, the others the test split (100 in the protocol).
        max_class_id (int): Class ids must lie in ``1 .. max_class_id`` (200 classes);
            any other is an error naming the file and line.
        **kwargs: See :class:`BaseRetrievalDataset`; ``ann_file`` defaults to
            ``images.txt`` and ``data_prefix`` to ``dict(img_path='images')``.
    """

    specs = (DatasetSpec(
        name='cub', title='CUB-200-2011',
        homepage='https://www.vision.caltech.edu/datasets/cub_200_2011/',
        files=(RemoteFile('CUB_200_2011.tgz',
                          'https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz',
                          md5='97eceeb196236b17998738112f37df78',
                          checksum_source='the CaltechDATA record of the dataset',
                          size=int(1.15 * GB), unpacked=int(1.2 * GB), approx=True,
                          unpack='tar',
                          prefix='CUB_200_2011'), ),
        views=(CountView('train', dict(type='CUBDataset', split='train'), 5_864, 100),
               CountView('test', dict(type='CUBDataset', split='test'), 5_924, 100)),
        terms=('Images from Flickr, copyright their owners; Caltech distributes the dataset '
               'for research. Non-commercial research, cite Wah et al. 2011.'),
        miniature=write_cub), )

    DEFAULT_IMG_PREFIX = 'images'
    DEFAULT_ANN_FILE = 'images.txt'

    def __init__(self,
                 label_file: str = 'image_class_labels.txt',
                 num_train_classes: int = 100,
                 max_class_id: int = 200,
                 **kwargs):
        if not 0 < num_train_classes < max_class_id:
            raise ValueError(f'CUBDataset: num_train_classes={num_train_classes}; expected '
                             f'1 .. max_class_id - 1 = {max_class_id - 1}')
        self.label_file = label_file
        self.num_train_classes = num_train_classes
        self.max_class_id = max_class_id
        super().__init__(**kwargs)

    def _read_id_pairs(self, path: str, key: str, what: str) -> dict:
        pairs = {}
        for lineno, line in self._read_lines(path, key):
            fields = line.split()
            if len(fields) != 2:
                raise malformed(path, lineno, f"2 fields 'image_id {what}'", line)
            image_id = parse_int(path, lineno, fields[0], 'image_id', line)
            if image_id in pairs:
                raise malformed(path, lineno, f'a new image_id (seen {image_id} before)', line)
            pairs[image_id] = (lineno, fields[1])
        return pairs

    def parse_samples(self) -> List[dict]:
        label_path = self._join_root(self.label_file)
        paths = self._read_id_pairs(self.ann_file, 'ann_file', 'path')
        labels = self._read_id_pairs(label_path, 'label_file', 'class_id')
        samples, entries = [], []  # entries: (images.txt line, path, class_id)
        for image_id, (lineno, rel_path) in paths.items():
            if image_id not in labels:
                raise ValueError(f'{label_path}: no class for image_id {image_id} '
                                 f'({self.ann_file}, line {lineno})')
            label_line, text = labels[image_id]
            class_id = parse_int(label_path, label_line, text, 'class_id',
                                 f'{image_id} {text}')
            if not 1 <= class_id <= self.max_class_id:
                # Out of range would otherwise land silently in a split (-5: train).
                raise malformed(label_path, label_line,
                                f'a class_id in 1 .. {self.max_class_id}', f'{image_id} {text}')
            entries.append((self.ann_file, lineno, rel_path, class_id))
            if (class_id <= self.num_train_classes) == (self.split == 'train'):
                samples.append(dict(img_path=self._join_img(rel_path), gt_label=class_id))
        check_unique_images(entries)  # images.txt lists each image once
        return samples
