"""NC-clean: the Landmarks dataset of "Neural Codes" (Babenko et al., ECCV 2014) cleaned by Gordo
et al. ("Deep Image Retrieval: Learning Global Representations for Image Search", ECCV 2016)."""
import os.path as osp
from typing import Collection, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import (BaseRetrievalDataset, check_int_spellings, check_unique_images,
                           is_int_text, malformed)
from .gldv1 import drop_missing_images
from .miniature import ImageFn, hex_id, interleaved, write_image, write_text
from .spec import GB, CountView, DatasetSpec, RemoteFile

__all__ = ['NCCleanDataset', 'write_ncclean']


def write_ncclean(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
                  plan: Optional[Dict[str, list]] = None,
                  missing: Collection[Tuple[str, int]] = ()) -> None:
    """``annotation_clean_<split>.txt`` (``<url> <label>`` lines) and
    ``images/<file name of the url>``.

    ``plan``: ``{split: [label of each row]}``. ``missing``: ``(split, row)``
    of the rows whose image is not written (dead URLs; configs read them with
    ``skip_missing=True``). Default: labels ``landmark_000 ..``, ``per_class``
    interleaved rows each in ``train`` and one in ``val``.
    """
    if plan is None:
        labels = [f'landmark_{c:03d}' for c in range(check_int(classes, 'classes'))]
        plan = dict(train=interleaved(labels, per_class), val=labels)
    class_of, seen = {}, {}
    for split, labels in plan.items():
        lines = []
        for row, label in enumerate(labels):
            name = f'{hex_id(f"nc-{split}-{row}")}.jpg'
            lines.append(f'http://static.panoramio.com/photos/original/{name} {label}')
            class_index = class_of.setdefault(label, len(class_of))
            k = seen[label] = seen.get(label, -1) + 1
            if (split, row) not in missing:
                write_image(osp.join(root, 'images', name), image_fn(class_index, k))
        write_text(osp.join(root, f'annotation_clean_{split}.txt'), lines)


@DATASETS.register_module()
class NCCleanDataset(BaseRetrievalDataset):
    """NC-clean (Landmarks-clean): 27,965 images of 581 landmarks in the copy used by DToP (Table
    A6; the list names more images, some URLs are dead).

    Layout (the lists released by Gordo et al., read the same way by
    naver/deep-image-retrieval's ``Landmarks_clean``)::

        data_root/
            annotation_clean_train.txt   # one image per line: "<url or path> <label>"
            annotation_clean_val.txt
            images/<file name of the url>

    Each line has two space-separated fields: the image's URL (the file is the last component
    of its path, as the downloaders save it) or path, and the landmark label, an integer or a
    name (one integer spelt two ways, ``05`` and ``5``, is an error). An image listed twice
    (also two URLs with one file name) is an error.

    Args:
        split (str): ``'train'`` or ``'val'``.
        ann_file (str): ``''`` means ``annotation_clean_{split}.txt``.
        data_prefix (dict | None): ``dict(img_path=...)``, default ``images``.
        skip_missing (bool): Drop lines whose image file does not exist
            (dead URLs) instead of failing when the image is loaded.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    specs = (DatasetSpec(
        name='ncclean', title='NC-clean (Landmarks-clean of Gordo et al.)',
        homepage='https://europe.naverlabs.com/research/computer-vision/'
                 'learning-visual-representations/deep-image-retrieval/',
        files=(RemoteFile('annotation_clean_train.txt', size=5_000_000, approx=True),
               RemoteFile('annotation_clean_val.txt', size=1_000_000, approx=True),
               RemoteFile('images', folder=True, size=0, unpacked=5 * GB, approx=True,
                          optional=True)),
        views=(CountView('train', dict(type='NCCleanDataset', split='train',
                                       skip_missing=True), 27_965, 581, exact=False), ),
        terms=('Lists by Gordo et al. (ECCV 2016) of images of the Neural Codes landmarks '
               'dataset (Babenko et al., ECCV 2014), web URLs whose licences vary; research '
               'use.'),
        manual=('Download the Landmarks-clean lists (annotation_clean_train.txt, '
                'annotation_clean_val.txt) from the deep-image-retrieval page of Naver Labs '
                'Europe, fetch the images by URL into a folder images/ (named by the last '
                'component of each URL), put the lists and images/ in one folder and pass it '
                'as from_dir (images/ is linked, not copied). Many URLs are dead: configs '
                'read it with skip_missing=True.'),
        miniature=write_ncclean), )

    SPLITS = ('train', 'val')
    DEFAULT_IMG_PREFIX = 'images'
    DEFAULT_ANN_FILE = 'annotation_clean_{split}.txt'

    def __init__(self, split: str = 'train', skip_missing: bool = False, **kwargs):
        self.skip_missing = bool(skip_missing)
        super().__init__(split=split, **kwargs)

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        samples, entries = [], []
        for lineno, line in self._read_lines(path, 'ann_file'):
            fields = line.split()
            if len(fields) != 2:
                raise malformed(path, lineno, '2 space-separated fields "<url or path> <label>"',
                                line)
            location, label = fields
            if '://' in location:
                location = osp.basename(unquote(urlsplit(location).path))
                if not location:
                    raise malformed(path, lineno, 'a URL ending with a file name', line)
            entries.append((path, lineno, location, label))
            # Integer labels sort numerically, others as strings (BaseRetrievalDataset).
            key = int(label) if is_int_text(label) else label
            samples.append(dict(img_path=self._join_img(location), gt_label=key))
        check_unique_images(entries)
        check_int_spellings(((p, n, label) for p, n, _, label in entries), 'label',
                            'one class or two cannot be told')
        if self.skip_missing:
            samples = drop_missing_images(samples)
        return samples
