"""iNaturalist 2018 (Van Horn et al., CVPR 2018) with the retrieval split of
Brown et al. ("Smooth-AP", ECCV 2020)."""
import posixpath
from typing import List

from irtbox.registry import DATASETS
from .base_dataset import (BaseRetrievalDataset, check_int_spellings, check_unique_images,
                           malformed)

__all__ = ['INaturalist2018Dataset']


@DATASETS.register_module()
class INaturalist2018Dataset(BaseRetrievalDataset):
    """iNaturalist 2018, retrieval split: 325,846 train / 136,093 test
    images, the categories of the two splits disjoint.

    Layout (the official images plus the split files)::

        data_root/
            Inaturalist_train_set1.txt   # one image path per line
            Inaturalist_test_set1.txt
            train_val2018/Plantae/7477/3b60c9486db1d2ee875f11a669fbde4a.jpg

    The class of an image is its category folder, the parent folder in the
    path (``7477`` above; an int when it is all digits, so ids sort
    numerically: the category ids are integers by format, and two folders
    spelling one id two ways, ``05`` and ``5``, are an error naming both
    lines). An image listed twice in a file is an error naming both lines.
    Labels are the categories of the split mapped in
    increasing order to ``0 .. C-1``; the test split is evaluated
    leave-one-out. Image paths are relative to ``data_prefix['img_path']``
    (default ``data_root``).
    """

    def default_ann_file(self, split):
        return f'Inaturalist_{split}_set1.txt'

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        expected = "one path '<...>/<category>/<image>' per line"
        samples, entries = [], []
        for lineno, line in self._read_lines(path, 'ann_file'):
            if len(line.split()) != 1:
                raise malformed(path, lineno, expected, line)
            category = posixpath.basename(posixpath.dirname(line.replace('\\', '/')))
            if not category or line.endswith(('/', '\\')):
                raise malformed(path, lineno, expected, line)
            key = int(category) if category.isdigit() else category
            entries.append((path, lineno, line, key, category))
            samples.append(dict(img_path=self._join_img(line), gt_label=key))
        check_unique_images(e[:4] for e in entries)
        check_int_spellings(((p, n, c) for p, n, _, _, c in entries if c.isdigit()),
                            'category folder', 'they would be one class from two folders')
        return samples
