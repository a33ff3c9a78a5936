"""iNaturalist 2018 (Van Horn et al., CVPR 2018) with the retrieval split of
Brown et al. ("Smooth-AP", ECCV 2020)."""
import hashlib
import os.path as osp
import posixpath
from typing import List, Optional

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import (BaseRetrievalDataset, check_int_spellings, check_unique_images,
                           malformed)
from .miniature import ImageFn, write_image, write_text
from .spec import GB, CountView, DatasetSpec, RemoteFile

__all__ = ['INaturalist2018Dataset', 'write_inat2018']

INAT_SUPER_CATEGORIES = ('Plantae', 'Aves', 'Insecta', 'Fungi', 'Mammalia')


def write_inat2018(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                   plan: Optional[dict] = None) -> None:
    """``Inaturalist_<split>_set1.txt`` listing
    ``train_val2018/<super-category>/<category>/<md5>.jpg``.

    ``plan``: ``{split: [(super-category, category id, number of images)]}``.
    Default: categories ``0 .. classes - 1`` train, the next ``classes`` test.
    """
    if plan is None:
        check_int(classes, 'classes')
        check_int(per_class, 'per_class')
        supers = INAT_SUPER_CATEGORIES
        plan = {split: [(supers[c % len(supers)], c, per_class)
                        for c in range(s * classes, (s + 1) * classes)]
                for s, split in enumerate(('train', 'test'))}
    for split, rows in plan.items():
        lines = []
        for super_name, category, count in rows:
            for k in range(count):
                name = hashlib.md5(f'{category}-{k}'.encode()).hexdigest()
                rel = f'train_val2018/{super_name}/{category}/{name}.jpg'
                write_image(osp.join(root, rel), image_fn(category, k))
                lines.append(rel)
        write_text(osp.join(root, f'Inaturalist_{split}_set1.txt'), lines)


@DATASETS.register_module()
class INaturalist2018Dataset(BaseRetrievalDataset):
    """iNaturalist 2018, retrieval split: 325,846 train / 136,093 test
    images, the categories of the two splits disjoint.

    Layout (the official images plus the split files)::

        data_root/
            Inaturalist_train_set1.txt   # one image path per line
            Inaturalist_test_set1.txt
            train_val2018/Plantae/7477/3b60c9486db1d2ee875f11a669fbde4a.jpg

    The class of an image is its category folder (``7477`` above, an integer; one id spelt
    two ways, ``05`` and ``5``, is an error). The test split is evaluated leave-one-out. A
    repeated image is an error.
    """

    specs = (DatasetSpec(
        name='inat2018', title='iNaturalist 2018 (retrieval split)',
        homepage='https://github.com/visipedia/inat_comp/tree/master/2018',
        files=(RemoteFile('Inat_dataset_splits.zip',
                          'https://drive.google.com/uc?export=download&id='
                          '1sXfkBTFDrRU3__-NUs1qBP3sf_0uMB98',
                          size=20_000_000, approx=True, unpack='zip', flatten=True,
                          include=('Inaturalist_*_set1.txt', )),
               RemoteFile('train_val2018.tar.gz',
                          'https://ml-inat-competition-datasets.s3.amazonaws.com/2018/'
                          'train_val2018.tar.gz',
                          md5='b1c6952ce38f31868cc50ea72d066cc3',
                          checksum_source='the iNaturalist 2018 competition page (visipedia)',
                          size=120 * GB, unpacked=125 * GB, approx=True, unpack='tar')),
        views=(CountView('train', dict(type='INaturalist2018Dataset', split='train'),
                         325_846, 5_690),
               CountView('test', dict(type='INaturalist2018Dataset', split='test'),
                         136_093, 2_452)),
        terms=('Images uploaded to iNaturalist by its users, each under its own (mostly '
               'Creative Commons) licence; the competition data is for research. The split '
               'files are those of Brown et al. (Smooth-AP, ECCV 2020).'),
        miniature=write_inat2018), )

    DEFAULT_ANN_FILE = 'Inaturalist_{split}_set1.txt'

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        expected = "one path '<...>/<category>/<image>' per line"
        samples, entries = [], []
        for lineno, line in self._read_lines(path, 'ann_file'):
            category = posixpath.basename(posixpath.dirname(line.replace('\\', '/')))
            if len(line.split()) != 1 or not category or line.endswith(('/', '\\')):
                raise malformed(path, lineno, expected, line)
            key = int(category) if category.isdigit() else category
            entries.append((path, lineno, line, key, category))
            samples.append(dict(img_path=self._join_img(line), gt_label=key))
        check_unique_images(e[:4] for e in entries)
        check_int_spellings(((p, n, c) for p, n, _, _, c in entries if c.isdigit()),
                            'category folder', 'they would be one class from two folders')
        return samples
