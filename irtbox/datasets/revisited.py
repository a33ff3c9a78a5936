"""Revisited Oxford and Paris (Radenovic et al., "Revisiting Oxford and Paris:
Large-Scale Image Retrieval Benchmarking", CVPR 2018), optionally with the
R1M distractors."""
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np
from mmengine.dataset import BaseDataset

from irtbox.registry import DATASETS
from .base_dataset import TEXT_ENCODING, check_unique_images, check_utf8
from .pickle_utils import as_int_array, as_string_list, load_pickle, require_keys

__all__ = ['RevisitedDataset']

_GND_KEYS = ('easy', 'hard', 'junk', 'bbx')


@DATASETS.register_module()
class RevisitedDataset(BaseDataset):
    """ROxford5k / RParis6k: 70 cropped queries searched in 4,993 / 6,322 images.

    Layout (the official release)::

        data_root/
            gnd_roxford5k.pkl     # or gnd_rparis6k.pkl
            jpg/all_souls_000013.jpg
            ...

    ``gnd_<dataset_name>.pkl`` holds ``imlist`` (database names, no
    extension), ``qimlist`` (query names, not in the database) and ``gnd``, one
    dict per query with ``easy``, ``hard``, ``junk`` (0-based indices into
    ``imlist``) and ``bbx`` = [x1, y1, x2, y2] (query box, pixels).

    Samples, in this order (so that ``sample_idx`` says what an image is):

    - ``0 .. nq-1``: the queries (``qimlist`` order), ``is_query=True`` and
      ``bbox`` = their ``bbx``: put ``CropBBox`` right after loading in the
      pipeline, so that queries are cropped before any resizing (protocol);
    - ``nq .. nq+nd-1``: the database (``imlist`` order, database index =
      ``sample_idx - nq``), ``is_query=False``;
    - then, with ``distractors_list``, the R1M distractors, ``is_query=False``;
      they are never positives.

    A name listed twice in ``imlist``, or a path twice in ``distractors_list``,
    is an error naming both places (the official files list each image
    once; a copy would be retrieved twice).

    No sample has a ``gt_label`` (relevance is per query, from ``gnd``), so
    the data samples carry none. ``metainfo`` (the metric's
    ``dataset_meta``): ``dataset_name``, ``gnd`` (the list of dicts, indices
    as int lists, ``bbx`` as 4 floats), ``num_queries``, ``num_database``,
    ``num_distractors``.

    Args:
        data_root (str): Folder of the ``gnd`` pickle and of ``jpg/``.
        dataset_name (str): ``'roxford5k'`` or ``'rparis6k'``; names the
            default pickle and the metric's prefix.
        ann_file (str): The ground-truth pickle; ``''`` means
            ``gnd_<dataset_name>.pkl``. Relative to ``data_root``.
        data_prefix (dict | None): ``dict(img_path=...)``, the image folder
            (default ``jpg``, relative to ``data_root``).
        img_suffix (str): Appended to the names of ``imlist`` / ``qimlist``.
        distractors_list (str | None): Text file with one distractor image
            path per line (blank lines skipped); relative to
            ``distractors_root``.
        distractors_root (str): Folder the distractor paths are relative to.
        pipeline (Sequence[dict | Callable]): Transforms of a sample.
        test_mode (bool): MMEngine's flag; True by default (an evaluation set:
            a failing transform is an error, not a reason to draw another image).
        **kwargs: Passed to ``mmengine.dataset.BaseDataset`` (``indices`` is
            refused: sample indices must stay aligned with ``gnd``).
    """

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
                 lazy_init: bool = False,
                 **kwargs):
        if dataset_name not in self.DATASET_NAMES:
            raise ValueError(f'RevisitedDataset: dataset_name must be one of '
                             f'{list(self.DATASET_NAMES)}, got {dataset_name!r}')
        if kwargs.get('indices') is not None:
            raise ValueError('RevisitedDataset: indices is not supported (the ground truth '
                             'refers to the full query and database lists)')
        if data_prefix is None:
            data_prefix = dict(img_path='jpg')
        elif not isinstance(data_prefix, dict) or 'img_path' not in data_prefix:
            raise ValueError('RevisitedDataset: data_prefix must be a dict with the key '
                             f"'img_path' (the image folder), got {data_prefix!r}")
        self.dataset_name = dataset_name
        self.img_suffix = img_suffix
        self.distractors_root = distractors_root
        self.distractors_list = distractors_list
        if distractors_list and distractors_root and not osp.isabs(distractors_list):
            self.distractors_list = osp.join(distractors_root, distractors_list)
        self._query_mask: Optional[np.ndarray] = None
        super().__init__(
            ann_file=ann_file or f'gnd_{dataset_name}.pkl',
            data_root=data_root,
            data_prefix=data_prefix,
            pipeline=list(pipeline),
            test_mode=test_mode,
            lazy_init=lazy_init,
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
        distractors = self._read_distractors() if self.distractors_list else []
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

    def _read_distractors(self) -> List[str]:
        path = self.distractors_list
        if not osp.isfile(path):
            raise FileNotFoundError(f'{type(self).__name__}: distractors_list {path!r} not '
                                    f'found (distractors_root={self.distractors_root!r})')
        check_utf8(path)
        with open(path, encoding=TEXT_ENCODING) as f:
            lines = [(n, line.strip()) for n, line in enumerate(f, start=1) if line.strip()]
        check_unique_images((path, n, line, None) for n, line in lines)
        paths = [osp.join(self.distractors_root, line) for _, line in lines]
        if not paths:
            raise ValueError(f'{path}: expected one distractor image path per line, '
                             'the file lists none')
        return paths

    def full_init(self):
        if self._fully_initialized:
            return
        super().full_init()
        n = self._metainfo['num_queries']
        self._query_mask = np.arange(len(self)) < n

    def get_query_mask(self) -> np.ndarray:
        """Boolean (N,) mask of the query samples (the first ``num_queries``)."""
        self.full_init()
        return self._query_mask.copy()
