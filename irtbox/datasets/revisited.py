"""Revisited Oxford and Paris (Radenovic et al., "Revisiting Oxford and Paris:
Large-Scale Image Retrieval Benchmarking", CVPR 2018), optionally with the R1M distractors."""
import os.path as osp
from functools import partial
from typing import List, Optional, Sequence, Tuple

import numpy as np
from mmengine.dataset import BaseDataset

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from irtbox.utils.errors import ArgumentError
from .base_dataset import check_unique_images, image_prefix, read_lines
from .pickle_utils import as_int_array, as_string_list, load_pickle, require_keys
from .miniature import ImageFn, write_image, write_pickle, write_text
from .spec import FLICKR_TERMS, GB, CountView, DatasetSpec, RemoteFile

__all__ = ['RevisitedDataset', 'R1M_FIRST_CLASS', 'write_revisited',
           'write_revisitop1m']

_GND_KEYS = ('easy', 'hard', 'junk', 'bbx')
_REVISITOP = 'http://cmp.felk.cvut.cz/revisitop/data/datasets'
_R1M = 'http://ptak.felk.cvut.cz/revisitop/revisitop1m'

# Landmark names of the two datasets, for image names that look like the released ones.
_LANDMARKS = {
    'roxford5k': ('all_souls', 'ashmolean', 'balliol', 'bodleian', 'christ_church',
                  'cornmarket', 'hertford', 'keble', 'magdalen', 'pitt_rivers',
                  'radcliffe_camera'),
    'rparis6k': ('defense', 'eiffel', 'invalides', 'louvre', 'moulinrouge', 'museedorsay',
                 'notredame', 'pantheon', 'pompidou', 'sacrecoeur', 'triomphe'),
}
_PREFIX = {'roxford5k': '', 'rparis6k': 'paris_'}
_OTHERS = {'roxford5k': 'oxford', 'rparis6k': 'paris_general'}
_RELEVANCE = ('easy', 'hard', 'junk')
# Distractor k is class R1M_FIRST_CLASS + k: one class each, none of the landmarks' classes.
R1M_FIRST_CLASS = 10000


def write_revisited(root: str, image_fn: ImageFn, dataset_name: str, classes: int = 8,
                    per_class: int = 4, relevance: Sequence[str] = ('easy', 'hard', 'junk', 'easy'),
                    others: int = 4) -> None:
    """``gnd_<dataset_name>.pkl`` and ``jpg/<name>.jpg``.

    ``classes`` landmarks with one query each, image 0 of the landmark, its ``bbx`` the central
    three quarters of it (floats, inside the image); the database holds ``per_class`` more images of
    every landmark, the k-th labelled ``relevance[k % len(relevance)]`` (``'easy'``, ``'hard'`` or
    ``'junk'``) for its query, and ``others`` images of classes of their own (``classes ..``) that
    are no query's. The database order is shuffled (fixed seed).
    """
    check_int(classes, 'classes')
    check_int(per_class, 'per_class')
    check_int(others, 'others', 0)
    if not relevance or any(r not in _RELEVANCE for r in relevance):
        raise ArgumentError(f'relevance must be a non-empty sequence of {_RELEVANCE}, '
                            f'got {relevance!r}', 'relevance')
    names, prefix = _LANDMARKS[dataset_name], _PREFIX[dataset_name]

    def name(c: int, k: int) -> str:
        return f'{prefix}{names[c % len(names)]}_{1000 * (c // len(names)) + k:06d}'

    # (name, class, image index, (query, relevance) or None)
    database = [(name(c, k + 1), c, k + 1, (c, relevance[k % len(relevance)]))
                for c in range(classes) for k in range(per_class)]
    database += [(f'{_OTHERS[dataset_name]}_{j:06d}', classes + j, 0, None)
                 for j in range(others)]
    database = [database[i] for i in np.random.default_rng(0).permutation(len(database))]
    gnd = [dict(easy=[], hard=[], junk=[]) for _ in range(classes)]
    for i, (image_name, c, k, label) in enumerate(database):
        write_image(osp.join(root, 'jpg', f'{image_name}.jpg'), image_fn(c, k))
        if label is not None:
            gnd[label[0]][label[1]].append(i)
    for c in range(classes):
        img = image_fn(c, 0)
        write_image(osp.join(root, 'jpg', f'{name(c, 0)}.jpg'), img)
        height, width = img.shape[:2]
        gnd[c]['bbx'] = [width / 8, height / 8, width * 7 / 8, height * 7 / 8]
    write_pickle(osp.join(root, f'gnd_{dataset_name}.pkl'),
                 dict(imlist=[d[0] for d in database],
                      qimlist=[name(c, 0) for c in range(classes)], gnd=gnd))


def write_revisitop1m(root: str, image_fn: ImageFn, count: int = 8) -> None:
    """``revisitop1m.txt`` (one image path per line, relative to ``jpg/``) and
    ``jpg/<k % 2>/r1m_<k:07d>.jpg``; distractor k is image 0 of class
    ``R1M_FIRST_CLASS + k``."""
    check_int(count, 'count')
    lines = [f'{k % 2}/r1m_{k:07d}.jpg' for k in range(count)]
    for k, rel in enumerate(lines):
        write_image(osp.join(root, 'jpg', rel), image_fn(R1M_FIRST_CLASS + k, 0))
    write_text(osp.join(root, 'revisitop1m.txt'), lines)


def _read_distractors(path: str, root: str) -> List[str]:
    """The image paths (under ``root``) a distractor list names, one per line."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'RevisitedDataset: distractors_list {path!r} not '
                                f'found (distractors_root={root!r})')
    lines = read_lines(path)
    check_unique_images((path, n, line, None) for n, line in lines)
    paths = [osp.join(root, line) for _, line in lines]
    if not paths:
        raise ValueError(f'{path}: expected one distractor image path per line, '
                         'the file lists none')
    return paths


class R1MList:
    """The R1M distractors as ``irtbox check`` reads them (the revisitop1m spec's split):
    ``revisitop1m.txt`` under ``data_root``, its paths under ``jpg/``, as a
    ``RevisitedDataset`` reads them with ``distractors_list``. Not registered: no config
    trains or tests on the list alone."""

    def __init__(self, data_root: str, lazy_init: bool = False, **kwargs):
        self.ann_file = osp.join(data_root, 'revisitop1m.txt')
        images = osp.join(data_root, 'jpg')
        self.paths = [] if lazy_init else _read_distractors(self.ann_file, images)

    def __len__(self) -> int:
        return len(self.paths)

    def get_data_info(self, idx: int) -> dict:
        return dict(img_path=self.paths[idx])


def _revisited(name: str, title: str, archives: Tuple[Tuple[str, int], ...], database: int,
               homepage: str) -> DatasetSpec:
    return DatasetSpec(
        name=name, title=title, homepage=homepage,
        files=(RemoteFile(f'gnd_{name}.pkl', f'{_REVISITOP}/{name}/gnd_{name}.pkl',
                          size=500_000, approx=True),
               *(RemoteFile(archive, f'{homepage}/{archive}', size=size, approx=True,
                            unpack='tar', dest='jpg', flatten=True, include=('*.jpg', ))
                 for archive, size in archives)),
        views=(CountView(name, dict(type='RevisitedDataset', dataset_name=name),
                         queries=70, database=database), ),
        terms=FLICKR_TERMS + ' Revisited annotations: Radenovic et al., CVPR 2018.',
        miniature=partial(write_revisited, dataset_name=name))


def _point_at_r1m(cfg: dict, root: str) -> None:
    """The distractors of a ``RevisitedDataset`` config: ``distractors_root`` = ``root/jpg``
    (the list's paths are relative to it) and ``distractors_list`` =
    ``root/revisitop1m.txt`` (absolute, so not joined to ``distractors_root``)."""
    cfg.update(distractors_root=osp.join(root, 'jpg'),
               distractors_list=osp.join(root, 'revisitop1m.txt'))


@DATASETS.register_module()
class RevisitedDataset(BaseDataset):
    """ROxford5k / RParis6k: 70 cropped queries searched in 4,993 / 6,322 images.

    Layout, ``gnd`` pickle and sample order: docs/protocols.md, "ROxford5k and RParis6k". Samples
    ``0 .. nq-1`` are the queries (``is_query=True``, ``bbox`` = their ``bbx``: put ``CropBBox``
    right after loading), then the database in ``imlist`` order (database index = ``sample_idx -
    nq``), then any R1M distractors; this order is what the metric relies on. No ``gt_label``
    (relevance is per query, from ``gnd``); ``metainfo``: ``dataset_name``, ``gnd``,
    ``num_queries``, ``num_database``, ``num_distractors``. A name listed twice is an error.

    Args:
        data_root (str): Folder of the ``gnd`` pickle and of ``jpg/``.
        dataset_name (str): ``'roxford5k'`` or ``'rparis6k'``; names the default pickle and the
            metric's prefix.
        ann_file (str): The ground-truth pickle, relative to ``data_root``; ``''`` means
            ``gnd_<dataset_name>.pkl``.
        data_prefix (dict | None): ``dict(img_path=...)``, the image folder (default ``jpg``,
            relative to ``data_root``).
        img_suffix (str): Appended to the names of ``imlist`` / ``qimlist``.
        distractors_list (str | None): One distractor path per line, relative to
            ``distractors_root``.
        **kwargs: Passed to ``mmengine.dataset.BaseDataset`` (``indices`` is refused: sample
            indices must stay aligned with ``gnd``).
    """

    specs = (
        _revisited('roxford5k', 'Revisited Oxford5k',
                   (('oxbuild_images-v1.tgz', int(1.8 * GB)), ),
                   4_993, 'https://www.robots.ox.ac.uk/~vgg/data/oxbuildings'),
        _revisited('rparis6k', 'Revisited Paris6k', (('paris_1-v1.tgz', int(1.2 * GB)),
                                                     ('paris_2-v1.tgz', int(1.3 * GB))),
                   6_322, 'https://www.robots.ox.ac.uk/~vgg/data/parisbuildings'),
        DatasetSpec(
            name='revisitop1m', title='R1M distractors (revisitop1m)',
            homepage='http://ptak.felk.cvut.cz/revisitop/revisitop1m/',
            files=(RemoteFile('revisitop1m.txt', f'{_R1M}/revisitop1m.txt', size=40_000_000,
                              approx=True),
                   *(RemoteFile(f'revisitop1m.{k}.tar.gz', f'{_R1M}/jpg/revisitop1m.{k}.tar.gz',
                                size=int(3.5 * GB), approx=True, unpack='tar', dest='jpg')
                     for k in range(1, 101))),
            views=(CountView('distractors', dict(type=R1MList), images=1_001_001), ),
            terms=('Images from the YFCC100M collection (Flickr, Creative Commons licences of '
                   'their owners), selected by Radenovic et al. (CVPR 2018) for research.'),
            miniature=write_revisitop1m, point=_point_at_r1m, also_read_with='distractors_list'))

    DATASET_NAMES = ('roxford5k', 'rparis6k')

    def __init__(self,
                 data_root: str,
                 dataset_name: str = 'roxford5k',
                 ann_file: str = '',
                 data_prefix: Optional[dict] = None,
                 img_suffix: str = '.jpg',
                 distractors_list: Optional[str] = None,
                 distractors_root: str = '',
                 pipeline: Sequence = (),
                 test_mode: bool = True,
                 **kwargs):
        if dataset_name not in self.DATASET_NAMES:
            raise ValueError(f'RevisitedDataset: dataset_name must be one of '
                             f'{list(self.DATASET_NAMES)}, got {dataset_name!r}')
        if kwargs.get('indices') is not None:
            raise ValueError('RevisitedDataset: indices is not supported (the ground truth '
                             'refers to the full query and database lists)')
        self.dataset_name = dataset_name
        self.img_suffix = img_suffix
        self.distractors_root = distractors_root
        self.distractors_list = distractors_list
        if distractors_list and distractors_root and not osp.isabs(distractors_list):
            self.distractors_list = osp.join(distractors_root, distractors_list)
        super().__init__(
            ann_file=ann_file or f'gnd_{dataset_name}.pkl',
            data_root=data_root,
            data_prefix=image_prefix('RevisitedDataset', data_prefix, 'jpg'),
            pipeline=list(pipeline),
            test_mode=test_mode,
            **kwargs)

    def load_data_list(self) -> List[dict]:
        path = self.ann_file
        data = load_pickle(path)
        require_keys(data, ('imlist', 'qimlist', 'gnd'), path)
        imlist = as_string_list(data['imlist'], f"{path}: 'imlist'")
        qimlist = as_string_list(data['qimlist'], f"{path}: 'qimlist'")
        raw_gnd = data['gnd']
        if not isinstance(raw_gnd, (list, tuple)) or len(raw_gnd) != len(qimlist):
            got = len(raw_gnd) if isinstance(raw_gnd, (list, tuple)) else type(raw_gnd).__name__
            raise ValueError(f"{path}: 'gnd' must be a list with one dict per query "
                             f"({len(qimlist)} in 'qimlist'), got {got}")
        if not qimlist:
            raise ValueError(f"{path}: 'qimlist' is empty")
        gnd = [self._check_query(path, i, g, len(imlist)) for i, g in enumerate(raw_gnd)]
        # A database image twice would be found twice (and gnd's indices name one copy).
        check_unique_images((path, f'imlist[{i}]', name, None) for i, name in enumerate(imlist))

        img_dir = self.data_prefix['img_path']
        if not osp.isdir(img_dir):
            raise FileNotFoundError(f'image folder {img_dir!r} not found '
                                    f"(data_prefix['img_path'] under data_root "
                                    f'{self.data_root!r})')
        samples = [dict(img_path=osp.join(img_dir, q + self.img_suffix), is_query=True,
                        bbox=g['bbx']) for q, g in zip(qimlist, gnd)]
        samples += [dict(img_path=osp.join(img_dir, n + self.img_suffix), is_query=False)
                    for n in imlist]
        distractors = _read_distractors(self.distractors_list, self.distractors_root) \
            if self.distractors_list else []
        samples += [dict(img_path=p, is_query=False) for p in distractors]

        self._metainfo.update(dataset_name=self.dataset_name, gnd=gnd,
                              num_queries=len(qimlist), num_database=len(imlist),
                              num_distractors=len(distractors))
        return samples

    @staticmethod
    def _check_query(path: str, i: int, g, num_db: int) -> dict:
        where = f"{path}: gnd[{i}]"
        require_keys(g, _GND_KEYS, where)
        out = {key: as_int_array(g[key], f"{where}['{key}']", upper=num_db).tolist()
               for key in ('easy', 'hard', 'junk')}
        try:
            bbx = np.asarray(g['bbx'], dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            bbx = None
        if bbx is None or bbx.shape != (4, ) or not np.isfinite(bbx).all() \
                or bbx[2] <= bbx[0] or bbx[3] <= bbx[1]:
            raise ValueError(f"{where}['bbx']: expected [x1, y1, x2, y2] with x1 < x2 and "
                             f'y1 < y2, got {g["bbx"]!r}')
        out['bbx'] = bbx.tolist()
        return out

    def get_query_mask(self) -> np.ndarray:
        """Boolean (N,) mask of the query samples (the first ``num_queries``)."""
        self.full_init()
        return np.arange(len(self)) < self._metainfo['num_queries']
