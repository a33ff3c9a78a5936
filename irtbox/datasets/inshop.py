"""DeepFashion In-Shop Clothes Retrieval (Liu et al., "DeepFashion", CVPR 2016)."""
import os.path as osp
from typing import List, Optional

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import BaseRetrievalDataset, check_unique_images, malformed, parse_int
from .miniature import ImageFn, write_image, write_text
from .spec import GB, CountView, DatasetSpec, RemoteFile

__all__ = ['InShopDataset', 'write_inshop']

_HEADER = 'image_name item_id evaluation_status'
_STATUSES = ('train', 'query', 'gallery')

INSHOP_FOLDERS = ('WOMEN/Dresses', 'MEN/Denim', 'WOMEN/Blouses_Shirts', 'MEN/Tees_Tanks')
INSHOP_VIEWS = ('front', 'side', 'back', 'full', 'additional')


def write_inshop(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                 plan: Optional[list] = None) -> None:
    """``Eval/list_eval_partition.txt`` and
    ``Img/img/<folder>/id_<item:08d>/<k:02d>_<k>_<view>.jpg``.

    ``plan``: ``[(item number, folder, [status of each image])]``, statuses
    ``'train'``, ``'query'`` or ``'gallery'``. Default: ``classes`` training
    items, then ``classes`` test items whose first half of images are queries
    and the rest gallery (``per_class`` >= 2, so both).
    """
    if plan is None:
        check_int(classes, 'classes')
        check_int(per_class, 'per_class', 2)
        queries = per_class // 2
        test = ['query'] * queries + ['gallery'] * (per_class - queries)
        plan = [(i + 1, INSHOP_FOLDERS[i % len(INSHOP_FOLDERS)],
                 ['train'] * per_class if i < classes else test) for i in range(2 * classes)]
    entries = []
    for number, folder, statuses in plan:
        item_id = f'id_{number:08d}'
        for k, status in enumerate(statuses):
            view = INSHOP_VIEWS[k % len(INSHOP_VIEWS)]
            rel = f'img/{folder}/{item_id}/{k + 1:02d}_{k + 1}_{view}.jpg'
            write_image(osp.join(root, 'Img', rel), image_fn(number, k))
            entries.append(f'{rel:<60}{item_id:<16}{status}')  # the release's aligned columns
    write_text(osp.join(root, 'Eval', 'list_eval_partition.txt'),
               [str(len(entries)), 'image_name item_id evaluation_status', *entries])


@DATASETS.register_module()
class InShopDataset(BaseRetrievalDataset):
    """In-Shop: 7,982 clothing items; train 25,882 images of 3,997 items,
    test = 14,218 queries searched in a gallery of 12,612 images (3,985 items
    shared by query and gallery, disjoint from the training items).

    Layout (the official release)::

        data_root/
            Eval/list_eval_partition.txt
            Img/img/WOMEN/Dresses/id_00000002/02_1_front.jpg

    ``list_eval_partition.txt``: line 1 is the number of entries (checked),
    line 2 the header ``image_name item_id evaluation_status``, then one ``img/... id_XXXXXXXX
    train|query|gallery`` line per image. The paths in the file start with ``img/`` and the images
    live in ``data_root/Img/img``, so the default image prefix is ``dict(img_path='Img')``; set
    ``data_prefix=dict(img_path='')`` for copies that put ``img/`` directly under ``data_root``.

    ``split='train'``: the training images. ``split='test'``: queries and gallery together,
    in file order, each with ``is_query``, labelled by item id (a string, shared by queries
    and gallery). An image listed twice, in any partitions, is an error.
    """

    specs = (DatasetSpec(
        name='inshop', title='DeepFashion In-Shop Clothes Retrieval',
        homepage='https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html',
        files=(RemoteFile('list_eval_partition.txt', dest='Eval', size=3_000_000, approx=True),
               RemoteFile('img.zip', size=int(1.5 * GB), unpacked=int(1.6 * GB), approx=True,
                          unpack='zip', dest='Img')),
        views=(CountView('train', dict(type='InShopDataset', split='train'), 25_882, 3_997),
               CountView('test', dict(type='InShopDataset', split='test'), 14_218 + 12_612,
                         3_985, queries=14_218, database=12_612)),
        terms=('The DeepFashion agreement: the dataset is available for non-commercial '
               'research and educational purposes only; the images are not owned by CUHK; '
               'you may not redistribute them. You accept it on the download form.'),
        manual=('Fill in the DeepFashion download form (linked from the homepage), accept the '
                "agreement, then from the shared folder 'In-shop Clothes Retrieval Benchmark' "
                'download Img/img.zip and Eval/list_eval_partition.txt into one folder and '
                'pass it as from_dir.'),
        miniature=write_inshop), )

    DEFAULT_IMG_PREFIX = 'Img'
    DEFAULT_ANN_FILE = 'Eval/list_eval_partition.txt'

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        wanted = ('train', ) if self.split == 'train' else ('query', 'gallery')
        samples, count, entries = [], None, []
        for i, (lineno, line) in enumerate(self._read_lines(path, 'ann_file')):
            if i == 0:
                count = parse_int(path, lineno, line, 'number of entries', line)
                continue
            if i == 1:
                if line.split() != _HEADER.split():
                    raise malformed(path, lineno, f'the header {_HEADER!r}', line)
                continue
            fields = line.split()
            if len(fields) != 3 or fields[2] not in _STATUSES:
                raise malformed(path, lineno,
                                "'image_name item_id train|query|gallery'", line)
            name, item_id, status = fields
            entries.append((path, lineno, name, item_id))
            if status in wanted:
                sample = dict(img_path=self._join_img(name), gt_label=item_id)
                if self.split == 'test':
                    sample['is_query'] = status == 'query'
                samples.append(sample)
        check_unique_images(entries)  # the file lists each image once, in one partition
        if count is not None and count != len(entries):
            raise ValueError(f'{path}, line 1: says {count} entries, '
                             f'but the file lists {len(entries)}')
        return samples
