"""DeepFashion In-Shop Clothes Retrieval (Liu et al., "DeepFashion", CVPR 2016)."""
from typing import List

from irtbox.registry import DATASETS
from .base_dataset import BaseRetrievalDataset, check_unique_images, malformed, parse_int

__all__ = ['InShopDataset']

_HEADER = 'image_name item_id evaluation_status'
_STATUSES = ('train', 'query', 'gallery')


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
    line 2 the header ``image_name item_id evaluation_status``, then one
    ``img/... id_XXXXXXXX train|query|gallery`` line per image. The paths in
    the file start with ``img/`` and the images live in ``data_root/Img/img``,
    so the default image prefix is ``dict(img_path='Img')``; set
    ``data_prefix=dict(img_path='')`` for copies that put ``img/`` directly
    under ``data_root``.

    ``split='train'``: the training images. ``split='test'``: queries and
    gallery together, in file order, each with ``is_query``; the labels are
    the item ids of the test images mapped in increasing order to
    ``0 .. C-1`` (shared by queries and gallery). Item ids are strings
    (``id_00000002``). An image listed twice in the file (in one partition
    or in two, e.g. as a query and as a gallery image) is an error naming
    both lines: the official file lists each of its 52,712 images once.
    """

    DEFAULT_IMG_PREFIX = 'Img'

    def default_ann_file(self, split):
        return 'Eval/list_eval_partition.txt'

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        wanted = ('train', ) if self.split == 'train' else ('query', 'gallery')
        samples, count, num_entries, entries = [], None, 0, []
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
            num_entries += 1
            name, item_id, status = fields
            entries.append((path, lineno, name, item_id))
            if status in wanted:
                sample = dict(img_path=self._join_img(name), gt_label=item_id)
                if self.split == 'test':
                    sample['is_query'] = status == 'query'
                samples.append(sample)
        check_unique_images(entries)  # the file lists each image once, in one partition
        if count is not None and count != num_entries:
            raise ValueError(f'{path}, line 1: says {count} entries, '
                             f'but the file lists {num_entries}')
        return samples
