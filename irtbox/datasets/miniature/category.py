"""Miniatures of the category-level benchmarks: Stanford Online Products, CUB-200-2011,
Cars196, In-Shop and iNaturalist 2018, each in its official layout.

Every writer takes ``classes`` (per split) and ``per_class`` (images per
class), or an explicit ``plan`` (format in its docstring) that fixes the ids,
names and counts instead; ``image_fn(class_index, image_index)`` draws image
``image_index`` of a class, ``class_index`` being the class's id in the
annotation.
"""
import hashlib
import os.path as osp
from typing import Optional

import numpy as np

from irtbox.utils.checks import check_int
from .common import ImageFn, write_image, write_text

__all__ = ['write_cars196', 'write_cub', 'write_inat2018', 'write_inshop', 'write_sop']

# The 12 super-classes of SOP; super_class_id i names folder SOP_SUPER_CLASSES[i - 1]_final.
SOP_SUPER_CLASSES = ('bicycle', 'cabinet', 'chair', 'coffee_maker', 'fan', 'kettle', 'lamp',
                     'mug', 'sofa', 'stapler', 'table', 'toaster')
CUB_TRAIN_CLASSES = 100  # CUBDataset's num_train_classes: ids above it are the test split
CARS_TRAIN_CLASSES, CARS_CLASSES = 98, 196
INSHOP_FOLDERS = ('WOMEN/Dresses', 'MEN/Denim', 'WOMEN/Blouses_Shirts', 'MEN/Tees_Tanks')
INSHOP_VIEWS = ('front', 'side', 'back', 'full', 'additional')
INAT_SUPER_CATEGORIES = ('Plantae', 'Aves', 'Insecta', 'Fungi', 'Mammalia')


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
        lines = ['image_id class_id super_class_id path']
        for class_id, super_id, product, count in rows:
            for k in range(count):
                rel = f'{SOP_SUPER_CLASSES[super_id - 1]}_final/{product}_{k}.JPG'
                write_image(osp.join(root, rel), image_fn(class_id, k))
                lines.append(f'{image_id} {class_id} {super_id} {rel}')
                image_id += 1
        write_text(osp.join(root, f'Ebay_{split}.txt'), lines)


def _split_by_id(classes: int, train_classes: int) -> list:
    """Class ids ``1 .. classes`` (training split) and ``train_classes + 1 ..
    train_classes + classes`` (test split), for datasets split by class id."""
    check_int(classes, 'classes', maximum=train_classes)
    return [*range(1, classes + 1), *range(train_classes + 1, train_classes + classes + 1)]


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
                for c in _split_by_id(classes, CUB_TRAIN_CLASSES)]
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
        plan = [(c, per_class) for c in _split_by_id(classes, CARS_TRAIN_CLASSES)]
    fields = ['relative_im_path', 'bbox_x1', 'bbox_y1', 'bbox_x2', 'bbox_y2', 'class', 'test']
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
