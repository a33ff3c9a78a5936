"""Stanford Online Products (Song et al., "Deep Metric Learning via Lifted
Structured Feature Embedding", CVPR 2016)."""
import os.path as osp
from typing import List, Optional, Tuple

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import BaseRetrievalDataset, check_unique_images, malformed, parse_int
from .miniature import ImageFn, write_image, write_text
from .spec import GB, PML_CHECKSUMS, CountView, DatasetSpec, RemoteFile

__all__ = ['SOPDataset', 'write_sop']

_HEADER = 'image_id class_id super_class_id path'

# The 12 super-classes of SOP; super_class_id i names folder SOP_SUPER_CLASSES[i - 1]_final.
SOP_SUPER_CLASSES = ('bicycle', 'cabinet', 'chair', 'coffee_maker', 'fan', 'kettle', 'lamp',
                     'mug', 'sofa', 'stapler', 'table', 'toaster')


def write_sop(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
              plan: Optional[dict] = None) -> None:
    """``Ebay_train.txt`` / ``Ebay_test.txt`` and ``<super>_final/<product>_<k>.JPG``.

    ``plan``: ``{split: [(class_id, super_class_id, product, number of images)]}``;
    image ids run on across the splits in plan order. Default: class ids
    ``1 .. classes`` train, the next ``classes`` test, two per super-class.
    """
    if plan is None:
        check_int(classes, 'classes')
        check_int(per_class, 'per_class')
        # product: a 12-digit id like the release's, one per class
        plan = {split: [(c, 1 + (c - 1) // 2 % len(SOP_SUPER_CLASSES), 111000000000 + 7919 * c,
                         per_class) for c in range(1 + s * classes, 1 + (s + 1) * classes)]
                for s, split in enumerate(('train', 'test'))}
    image_id = 1
    for split, rows in plan.items():
        lines = [_HEADER]
        for class_id, super_id, product, count in rows:
            for k in range(count):
                rel = f'{SOP_SUPER_CLASSES[super_id - 1]}_final/{product}_{k}.JPG'
                write_image(osp.join(root, rel), image_fn(class_id, k))
                lines.append(f'{image_id} {class_id} {super_id} {rel}')
                image_id += 1
        write_text(osp.join(root, f'Ebay_{split}.txt'), lines)


@DATASETS.register_module()
class SOPDataset(BaseRetrievalDataset):
    """Stanford Online Products: 22,634 products (classes) of 12 super-classes.

    Layout (the official release)::

        data_root/
            Ebay_train.txt   # header, then "image_id class_id super_class_id path"
            Ebay_test.txt
            bicycle_final/111085122871_0.JPG
            ...

    ``split='train'`` reads ``Ebay_train.txt`` (59,551 images, 11,318
    classes), ``split='test'`` reads ``Ebay_test.txt`` (60,502 images, 11,316
    classes); the two class sets are disjoint. The label is ``class_id`` (an integer); the
    test split is evaluated leave-one-out. A repeated image is an error.
    """

    specs = (DatasetSpec(
        name='sop', title='Stanford Online Products',
        homepage='https://cvgl.stanford.edu/projects/lifted_struct/',
        files=(RemoteFile('Stanford_Online_Products.zip',
                          'http://ftp.cs.stanford.edu/cs/cvgl/Stanford_Online_Products.zip',
                          md5='7f73d41a2f44250d4779881525aea32e', checksum_source=PML_CHECKSUMS,
                          size=int(2.9 * GB), unpacked=int(3.0 * GB), approx=True, unpack='zip',
                          prefix='Stanford_Online_Products'), ),
        views=(CountView('train', dict(type='SOPDataset', split='train'), 59_551, 11_318),
               CountView('test', dict(type='SOPDataset', split='test'), 60_502, 11_316)),
        terms=('Images of eBay product listings collected by Song et al. (CVPR 2016) for '
               'research; no licence file comes with the archive: non-commercial research, '
               'cite the paper.'),
        miniature=write_sop), )

    DEFAULT_ANN_FILE = 'Ebay_{split}.txt'

    def parse_samples(self) -> List[dict]:
        rows = self._read_rows(self.ann_file, 'ann_file', self.split)
        self._check_class_disjoint(rows)
        return [dict(img_path=self._join_img(rel_path), gt_label=class_id)
                for _, class_id, rel_path in rows]

    def _read_rows(self, path: str, key: str, split: str) -> List[Tuple[int, int, str]]:
        """(line number, class_id, path) of every image of an Ebay_*.txt file; an error
        names the file and line of a malformed line, of a repeated image_id and both lines
        of a repeated path."""
        rows, line_of_id = [], {}
        for i, (lineno, line) in enumerate(self._read_lines(path, key)):
            if i == 0:
                if line.split() != _HEADER.split():
                    raise malformed(path, lineno, f'the header {_HEADER!r}', line)
                continue
            fields = line.split()
            if len(fields) != 4:
                raise malformed(path, lineno, f'4 fields {_HEADER!r}', line)
            image_id = parse_int(path, lineno, fields[0], 'image_id', line)
            if image_id in line_of_id:
                raise malformed(path, lineno, f'a new image_id ({image_id} is on line '
                                f'{line_of_id[image_id]} already)', line)
            line_of_id[image_id] = lineno
            class_id = parse_int(path, lineno, fields[1], 'class_id', line)
            parse_int(path, lineno, fields[2], 'super_class_id', line)
            rows.append((lineno, class_id, fields[3]))
        check_unique_images(((path, n, image, c) for n, c, image in rows), split)
        return rows

    def _check_class_disjoint(self, rows: List[Tuple[int, int, str]]) -> None:
        """The protocol's train and test classes are disjoint: a class in both (checked
        when the other split's file is there) is an error naming both lines."""
        other_split = 'test' if self.split == 'train' else 'train'
        other = self.default_ann_file(other_split)
        other_path = osp.join(osp.dirname(self.ann_file), other)
        if self.split not in ('train', 'test') or not osp.isfile(other_path):
            return
        other_rows = self._read_rows(other_path, other, other_split)
        other_line = {class_id: lineno for lineno, class_id, _ in reversed(other_rows)}
        for lineno, class_id, _ in rows:
            if class_id in other_line:
                raise ValueError(
                    f'{self.ann_file}, line {lineno}: class_id {class_id} is also in '
                    f'{other_path} (line {other_line[class_id]}); the train and test classes '
                    'of Stanford Online Products are disjoint')
