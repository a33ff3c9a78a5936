"""Stanford Online Products (Song et al., "Deep Metric Learning via Lifted
Structured Feature Embedding", CVPR 2016)."""
from typing import List

from irtbox.registry import DATASETS
from .base_dataset import BaseRetrievalDataset, malformed, parse_int

_HEADER = 'image_id class_id super_class_id path'


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
    classes); the two class sets are disjoint. Labels are the ``class_id``
    values of the split mapped, in increasing order, to ``0 .. C-1``; the
    test split is evaluated leave-one-out (no ``is_query``). Image paths are
    relative to ``data_prefix['img_path']`` (default: ``data_root``).
    """

    def default_ann_file(self, split):
        return f'Ebay_{split}.txt'

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        samples = []
        for i, (lineno, line) in enumerate(self._read_lines(path, 'ann_file')):
            if i == 0:
                if line.split() != _HEADER.split():
                    raise malformed(path, lineno, f'the header {_HEADER!r}', line)
                continue
            fields = line.split()
            if len(fields) != 4:
                raise malformed(path, lineno, f'4 fields {_HEADER!r}', line)
            parse_int(path, lineno, fields[0], 'image_id', line)
            class_id = parse_int(path, lineno, fields[1], 'class_id', line)
            parse_int(path, lineno, fields[2], 'super_class_id', line)
            samples.append(dict(img_path=self._join_img(fields[3]), gt_label=class_id))
        return samples
