"""SfM-120k (Radenovic et al., "Fine-tuning CNN Image Retrieval with No Human Annotation", TPAMI
2018): training tuples mined from 3D reconstructions, and its whitening set."""
import hashlib
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np
from mmengine.dataset import BaseDataset

from irtbox.registry import DATASETS
from irtbox.structures import DataSample
from irtbox.utils.checks import check_int, check_positive_int
from .base_dataset import BaseRetrievalDataset, image_prefix
from .pickle_utils import as_int_array, as_string_list, load_pickle, require_keys
from .miniature import ImageFn, write_image, write_pickle
from .spec import FLICKR_TERMS, GB, CountView, DatasetSpec, RemoteFile

__all__ = ['cid_to_path', 'SfM120kDataset', 'SfMWhitenDataset', 'write_sfm120k']

_CMP_TRAIN = 'http://cmp.felk.cvut.cz/cnnimageretrieval/data/train'


def cid_to_path(cid: str) -> str:
    """The released location of image ``cid`` under ``ims/``:
    ``<cid[-2:]>/<cid[-4:-2]>/<cid[-6:-4]>/<cid>`` (no extension)."""
    return osp.join(cid[-2:], cid[-4:-2], cid[-6:-4], cid)


def _read_pairs(data: dict, where: str, num_images: int):
    qidxs = as_int_array(data['qidxs'], f"{where}['qidxs']", upper=num_images)
    pidxs = as_int_array(data['pidxs'], f"{where}['pidxs']", upper=num_images)
    if len(qidxs) != len(pidxs):
        raise ValueError(f"{where}: 'qidxs' and 'pidxs' must be aligned (one positive per "
                         f'query), got {len(qidxs)} and {len(pidxs)} entries')
    return qidxs, pidxs


def _cid(text: str) -> str:
    """A 32-hex image name like SfM-120k's, stable for ``text``."""
    return hashlib.md5(text.encode()).hexdigest()


def _sfm_split(root: str, image_fn: ImageFn, split: str, clusters: Sequence[int],
               per_class: int) -> dict:
    """Write the images of one split; its entry of the pickle. Image i belongs to
    cluster ``clusters[i % n]`` (interleaved: nothing may rely on grouping); every
    two consecutive images of a cluster are a query/positive pair."""
    n = len(clusters)
    cids = [_cid(f'{split}/{c}/{k}') for k in range(per_class) for c in clusters]
    for i, cid in enumerate(cids):
        write_image(osp.join(root, 'ims', cid_to_path(cid)), image_fn(clusters[i % n], i // n))
    pairs = [(c + k * n, c + (k + 1) * n) for c in range(n) for k in range(per_class - 1)]
    return dict(cids=cids, cluster=[clusters[i % n] for i in range(len(cids))],
                qidxs=[q for q, _ in pairs], pidxs=[p for _, p in pairs])


def write_sfm120k(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4) -> None:
    """``retrieval-SfM-120k.pkl``, ``retrieval-SfM-120k-whiten.pkl`` and
    ``ims/<cid[-2:]>/<cid[-4:-2]>/<cid[-6:-4]>/<cid>`` (no extension).

    ``train``: clusters ``0 .. classes - 1``, ``val``: the next
    ``max(1, classes // 2)``, ``per_class`` (>= 2) images each and ``per_class - 1`` query/positive
    pairs per cluster. So tuple mode has ``classes * (per_class - 1)`` pairs (``qsize`` at most
    that) and ``classes - 1`` other clusters to draw negatives from (``nnum`` at most that). The
    whitening set: two more images of every ``val`` cluster, a matching pair each.
    """
    check_int(classes, 'classes')
    check_int(per_class, 'per_class', 2)
    train = list(range(classes))
    val = list(range(classes, classes + max(1, classes // 2)))
    write_pickle(osp.join(root, 'retrieval-SfM-120k.pkl'),
                 dict(train=_sfm_split(root, image_fn, 'train', train, per_class),
                      val=_sfm_split(root, image_fn, 'val', val, per_class)))
    cids = [_cid(f'whiten/{c}/{k}') for c in val for k in range(2)]
    for i, cid in enumerate(cids):
        write_image(osp.join(root, 'ims', cid_to_path(cid)),
                    image_fn(val[i // 2], per_class + i % 2))
    write_pickle(osp.join(root, 'retrieval-SfM-120k-whiten.pkl'),
                 dict(cids=cids, qidxs=list(range(0, len(cids), 2)),
                      pidxs=list(range(1, len(cids), 2))))


@DATASETS.register_module()
class SfM120kDataset(BaseRetrievalDataset):
    """SfM-120k: 117,369 images of 713 3D models (551 train, 162 val clusters).

    Layout and pickle: docs/protocols.md, "SfM-120k". Two modes:

    - plain (``tuples=False``): every image of the split in ``cids`` order, ``gt_label`` = its
      cluster id mapped in increasing order to ``0 .. C-1`` (``metainfo['classes']`` the ids).
    - tuples (``tuples=True``): ``len(self)`` = ``min(qsize, number of pairs)``; item ``i`` is
      the list of the ``2 + nnum`` packed images of tuple ``i`` (query, positive, negatives),
      each with ``tuple_target`` (-1 / 1 / 0) and ``tuple_idx`` = ``i``. ``TupleMiningHook``
      sets the tuples every epoch (:meth:`set_tuples`); use
      ``collate_fn=dict(type='tuple_collate')`` and ``persistent_workers=False`` (workers must
      see new tuples).

    Args:
        split (str): ``'train'`` or ``'val'``.
        data_root, ann_file, data_prefix: as :class:`BaseRetrievalDataset` (defaults above).
        pipeline (Sequence[dict | Callable]): Transforms of one image; in tuple mode it must end
            with ``PackRetrievalInputs``.
        qsize (int): Tuples per epoch.
        nnum (int): Negatives per tuple.
        **kwargs: See :class:`BaseRetrievalDataset` (``indices`` is refused: ``qidxs`` /
            ``pidxs`` index the full split).
    """

    specs = (DatasetSpec(
        name='sfm120k', title='SfM-120k (retrieval-SfM-120k, with its whitening set)',
        homepage='http://cmp.felk.cvut.cz/cnnimageretrieval/',
        files=(RemoteFile('retrieval-SfM-120k.pkl', f'{_CMP_TRAIN}/dbs/retrieval-SfM-120k.pkl',
                          size=10_000_000, approx=True),
               RemoteFile('retrieval-SfM-120k-whiten.pkl',
                          f'{_CMP_TRAIN}/dbs/retrieval-SfM-120k-whiten.pkl',
                          size=10_000_000, approx=True),
               RemoteFile('ims.tar.gz', f'{_CMP_TRAIN}/ims/ims.tar.gz', size=20 * GB,
                          unpacked=20 * GB, approx=True, unpack='tar', dest='ims')),
        views=(CountView('train', dict(type='SfM120kDataset', split='train'), classes=551),
               CountView('val', dict(type='SfM120kDataset', split='val'), classes=162),
               CountView('whiten', dict(type='SfMWhitenDataset'))),
        terms=FLICKR_TERMS + ' Radenovic et al., TPAMI 2018.',
        miniature=write_sfm120k), )

    SPLITS = ('train', 'val')
    DEFAULT_IMG_PREFIX = 'ims'
    DEFAULT_ANN_FILE = 'retrieval-SfM-120k.pkl'

    def __init__(self,
                 split: str = 'train',
                 data_root: str = '',
                 ann_file: str = '',
                 data_prefix: Optional[dict] = None,
                 pipeline: Sequence = (),
                 tuples: bool = False,
                 qsize: int = 2000,
                 nnum: int = 5,
                 **kwargs):
        if kwargs.get('indices') is not None:
            raise ValueError('SfM120kDataset: indices is not supported (qidxs and pidxs '
                             'index the full split)')
        self.tuples = bool(tuples)
        self.qsize = check_positive_int(qsize, f'{type(self).__name__}: qsize')
        self.nnum = check_positive_int(nnum, f'{type(self).__name__}: nnum')
        self._qidxs = self._pidxs = None
        self._tuples: Optional[np.ndarray] = None  # (num_tuples, 2 + nnum) image indices
        super().__init__(split=split, data_root=data_root, ann_file=ann_file,
                         data_prefix=data_prefix, pipeline=pipeline, **kwargs)

    def parse_samples(self) -> List[dict]:
        path = self.ann_file
        data = load_pickle(path)
        require_keys(data, (self.split, ), path)
        where = f"{path}: ['{self.split}']"
        data = data[self.split]
        require_keys(data, ('cids', 'cluster', 'qidxs', 'pidxs'), where)
        cids = as_string_list(data['cids'], f"{where}['cids']")
        clusters = as_int_array(data['cluster'], f"{where}['cluster']")
        if len(clusters) != len(cids):
            raise ValueError(f"{where}: 'cluster' must give one id per image of 'cids' "
                             f'({len(cids)}), got {len(clusters)}')
        self._qidxs, self._pidxs = _read_pairs(data, where, len(cids))
        if self.tuples and not len(self._qidxs):
            raise ValueError(f"{where}: tuple mode needs query/positive pairs; 'qidxs' is empty")
        return [dict(img_path=self._join_img(cid_to_path(cid)), gt_label=int(c))
                for cid, c in zip(cids, clusters)]

    # ---------------------------------------------------------------- access
    @property
    def num_images(self) -> int:
        """Number of images of the split (``len(self)`` in plain mode)."""
        self.full_init()
        return BaseDataset.__len__(self)

    @property
    def qidxs(self) -> np.ndarray:
        """Image index of the query of each pair of the split, (P,) int64."""
        self.full_init()
        return self._qidxs.copy()

    @property
    def pidxs(self) -> np.ndarray:
        """Image index of the positive of each pair (aligned with ``qidxs``)."""
        self.full_init()
        return self._pidxs.copy()

    @property
    def clusters(self) -> np.ndarray:
        """The cluster label (``gt_label``) of every image, (num_images,) int64."""
        return self.get_gt_labels()

    @property
    def tuple_size(self) -> int:
        """Images per tuple: query, positive and ``nnum`` negatives."""
        return 2 + self.nnum

    def __len__(self) -> int:
        if not self.tuples:
            return super().__len__()
        self.full_init()
        return min(self.qsize, len(self._qidxs))

    # ----------------------------------------------------------------- tuples
    def set_tuples(self, qidxs, pidxs, nidxs) -> None:
        """Set the tuples of the coming epoch (tuple mode): image indices of each tuple's
        query (T,), positive (T,) and negatives (T, nnum), T = ``len(self)``; no negative
        may share the query's cluster."""
        name = type(self).__name__
        if not self.tuples:
            raise RuntimeError(f'{name}.set_tuples: the dataset is not in tuple mode '
                               '(tuples=True)')
        num, n = len(self), self.num_images
        q = as_int_array(np.asarray(qidxs).reshape(-1), f'{name}.set_tuples: qidxs', upper=n)
        p = as_int_array(np.asarray(pidxs).reshape(-1), f'{name}.set_tuples: pidxs', upper=n)
        neg = np.asarray(nidxs)
        if q.shape != (num, ) or p.shape != (num, ) or neg.shape != (num, self.nnum):
            raise ValueError(f'{name}.set_tuples: expected qidxs ({num},), pidxs ({num},) and '
                             f'nidxs ({num}, {self.nnum}) (len(self) tuples, nnum negatives), '
                             f'got {np.shape(qidxs)}, {np.shape(pidxs)}, {np.shape(nidxs)}')
        neg = as_int_array(neg.reshape(-1), f'{name}.set_tuples: nidxs', upper=n).reshape(
            num, self.nnum)
        clusters = self._gt_labels
        clash = clusters[neg] == clusters[q][:, None]
        if clash.any():
            t, k = np.argwhere(clash)[0]
            raise ValueError(f'{name}.set_tuples: negative {k} of tuple {t} (image '
                             f'{neg[t, k]}) is in the query\'s cluster')
        self._tuples = np.concatenate([q[:, None], p[:, None], neg], axis=1)

    def __getitem__(self, idx: int):
        if not self.tuples:
            return super().__getitem__(idx)
        name = type(self).__name__
        self.full_init()
        if self._tuples is None:
            raise RuntimeError(f'{name}: no tuples yet; add dict(type=\'TupleMiningHook\') to '
                               'custom_hooks (it mines them every epoch) or call set_tuples()')
        if not -len(self) <= idx < len(self):
            raise IndexError(f'{name}: tuple {idx} out of range ({len(self)} tuples)')
        idx = idx % len(self)
        items = []
        for pos, img_idx in enumerate(self._tuples[idx]):
            packed = self.prepare_data(int(img_idx))
            if not isinstance(packed, dict) or not isinstance(packed.get('data_samples'),
                                                              DataSample):
                raise TypeError(f'{name}: in tuple mode the pipeline must end with '
                                f'PackRetrievalInputs; image {int(img_idx)} gave {packed!r}')
            packed['data_samples'].set_metainfo(
                dict(tuple_target=-1 if pos == 0 else int(pos == 1), tuple_idx=int(idx)))
            items.append(packed)
        return items


@DATASETS.register_module()
class SfMWhitenDataset(BaseDataset):
    """The whitening set of SfM-120k, for learning "Lw" (Radenovic et al.).

    Layout: ``data_root/retrieval-SfM-120k-whiten.pkl`` with ``cids`` (image
    names, files under ``ims/`` as in :class:`SfM120kDataset`) and the aligned
    matching pairs ``qidxs``, ``pidxs`` (indices into ``cids``).

    Samples: every image in ``cids`` order, no label; ``metainfo`` holds ``qidxs`` and
    ``pidxs`` for the whitening fitting.

    Arguments as ``mmengine.dataset.BaseDataset`` (``indices`` refused); ``test_mode`` is
    True by default (descriptors are extracted, not trained on).
    """

    def __init__(self,
                 data_root: str = '',
                 ann_file: str = '',
                 data_prefix: Optional[dict] = None,
                 pipeline: Sequence = (),
                 test_mode: bool = True,
                 **kwargs):
        if kwargs.get('indices') is not None:
            raise ValueError('SfMWhitenDataset: indices is not supported (qidxs and pidxs '
                             'index the full list)')
        super().__init__(ann_file=ann_file or 'retrieval-SfM-120k-whiten.pkl',
                         data_root=data_root,
                         data_prefix=image_prefix('SfMWhitenDataset', data_prefix, 'ims'),
                         pipeline=list(pipeline), test_mode=test_mode, **kwargs)

    def load_data_list(self) -> List[dict]:
        path = self.ann_file
        data = load_pickle(path)
        require_keys(data, ('cids', 'qidxs', 'pidxs'), path)
        cids = as_string_list(data['cids'], f"{path}: 'cids'")
        if not cids:
            raise ValueError(f"{path}: 'cids' is empty")
        qidxs, pidxs = _read_pairs(data, path, len(cids))
        if not len(qidxs):
            raise ValueError(f"{path}: no matching pairs ('qidxs' is empty)")
        self._metainfo.update(qidxs=qidxs.tolist(), pidxs=pidxs.tolist())
        prefix = self.data_prefix['img_path']
        return [dict(img_path=osp.join(prefix, cid_to_path(cid))) for cid in cids]
