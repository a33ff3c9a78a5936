"""Shared logic of the retrieval datasets: reading annotation files with clear
errors, remapping labels to contiguous ids, and cheap access to the labels."""
import csv
import logging
import os.path as osp
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from mmengine.dataset import BaseDataset
from mmengine.logging import print_log

__all__ = ['BaseRetrievalDataset', 'check_utf8', 'check_one_label_per_image', 'malformed',
           'iter_csv_rows', 'parse_int']


class BaseRetrievalDataset(BaseDataset):
    """Base class of the image-retrieval datasets (an MMEngine ``BaseDataset``).

    Subclasses implement :meth:`parse_samples`, which returns one dict per
    image with ``img_path`` (already joined with the image prefix) and
    ``gt_label`` holding the *original* class key (an int id or a name), plus
    optional ``is_query`` / ``bbox``. This class then

    - checks that the split is not empty (``ValueError`` otherwise),
    - maps the class keys of the split, sorted, to contiguous labels
      ``0 .. num_classes - 1`` (so ``gt_label`` is always 0-based and
      contiguous within the split; the original keys, in label order, are
      ``metainfo['classes']``),
    - caches the labels so that samplers and metrics read them without
      decoding any image (:meth:`get_gt_labels`, :meth:`get_query_mask`).

    Args:
        split (str | None): Which part of the dataset to load. Each subclass
            lists its valid values in ``SPLITS`` (``None`` there means any
            value is accepted).
        data_root (str): Root folder of the dataset; relative ``ann_file``
            and ``data_prefix`` paths are joined to it.
        ann_file (str): Annotation file; ``''`` picks the subclass default
            (which may depend on the split).
        data_prefix (dict | None): ``dict(img_path=...)``, the folder the
            image paths of the annotation are relative to; ``None`` picks the
            subclass default ``DEFAULT_IMG_PREFIX``.
        pipeline (Sequence[dict | Callable]): Transforms applied to a sample.
        test_mode (bool): MMEngine's flag: when True a transform returning
            ``None`` is an error instead of a trigger to draw another sample.
        lazy_init (bool): Defer reading the annotation until first use.
        **kwargs: Passed to ``mmengine.dataset.BaseDataset`` (``indices``,
            ``serialize_data``, ``max_refetch``, ...).
    """

    SPLITS: Optional[Tuple[str, ...]] = ('train', 'test')
    DEFAULT_IMG_PREFIX = ''

    def __init__(self,
                 split: Optional[str] = 'train',
                 data_root: str = '',
                 ann_file: str = '',
                 data_prefix: Optional[dict] = None,
                 pipeline: Sequence = (),
                 test_mode: bool = False,
                 lazy_init: bool = False,
                 **kwargs):
        if self.SPLITS is not None and split not in self.SPLITS:
            raise ValueError(f'{type(self).__name__}: split must be one of '
                             f'{list(self.SPLITS)}, got {split!r}')
        self.split = split
        if data_prefix is None:
            data_prefix = dict(img_path=self.DEFAULT_IMG_PREFIX)
        elif not isinstance(data_prefix, dict) or 'img_path' not in data_prefix:
            raise ValueError(f'{type(self).__name__}: data_prefix must be a dict with the key '
                             f"'img_path' (the image folder), got {data_prefix!r}")
        self._gt_labels: Optional[np.ndarray] = None
        self._query_mask: Optional[np.ndarray] = None
        super().__init__(
            ann_file=ann_file or self.default_ann_file(split),
            data_root=data_root,
            data_prefix=data_prefix,
            pipeline=list(pipeline),
            test_mode=test_mode,
            lazy_init=lazy_init,
            **kwargs)

    # ----------------------------------------------------------- subclass API
    def default_ann_file(self, split: Optional[str]) -> str:
        """The annotation file used when ``ann_file`` is not given."""
        return ''

    def parse_samples(self) -> List[dict]:
        """Read the annotation and return the samples of ``self.split`` with
        their original class keys in ``gt_label``; each dataset class defines it."""
        raise TypeError(f'{type(self).__name__} does not define parse_samples(); a retrieval '
                        'dataset must read its annotation there')

    # ------------------------------------------------------------ MMEngine API
    def load_data_list(self) -> List[dict]:
        samples = self.parse_samples()
        if not samples:
            raise ValueError(f'{type(self).__name__}: split {self.split!r} is '
                             f'empty (annotation: {self.ann_file!r})')
        keys = sorted({s['gt_label'] for s in samples}, key=_sort_key)
        label_of = {k: i for i, k in enumerate(keys)}
        for s in samples:
            s['gt_label'] = label_of[s['gt_label']]
        self._metainfo['classes'] = tuple(keys)
        return samples

    def full_init(self):
        if self._fully_initialized:
            return
        super().full_init()
        self._cache_labels()

    def get_subset_(self, indices):
        super().get_subset_(indices)
        self._cache_labels()

    def get_subset(self, indices):
        subset = super().get_subset(indices)
        subset._cache_labels()
        return subset

    def _cache_labels(self):
        # Read once from the (possibly serialised) list: samplers and metrics need them.
        infos = [self.get_data_info(i) for i in range(len(self))]
        self._gt_labels = np.array([d['gt_label'] for d in infos], dtype=np.int64)
        self._query_mask = None
        if any('is_query' in d for d in infos):
            self._query_mask = np.array([bool(d.get('is_query', False)) for d in infos])
            self._warn_queries_without_positive()

    def _warn_queries_without_positive(self) -> None:
        queries = self._gt_labels[self._query_mask]
        lonely = int(np.sum(~np.isin(queries, self._gt_labels[~self._query_mask])))
        if lonely:
            print_log(f'{type(self).__name__}: {lonely} of {len(queries)} queries of split '
                      f'{self.split!r} ({self.ann_file}) have no positive in the gallery; '
                      'Recall@K counts each of them as a miss, MAP@R, R-precision and '
                      'Precision@1 leave them out of their means', logger='current',
                      level=logging.WARNING)

    # ----------------------------------------------------------------- access
    @property
    def img_prefix(self) -> str:
        """The folder the annotation's image paths are relative to."""
        return self.data_prefix['img_path']

    @property
    def num_classes(self) -> int:
        """Number of classes of the split (``len(metainfo['classes'])``)."""
        self.full_init()
        return len(self._metainfo['classes'])

    def get_gt_labels(self) -> np.ndarray:
        """The 0-based label of every sample, shape (N,), int64."""
        self.full_init()
        return self._gt_labels.copy()

    def get_query_mask(self) -> Optional[np.ndarray]:
        """Boolean (N,) mask of the query samples, or None when the dataset
        has no query/gallery division (leave-one-out evaluation)."""
        self.full_init()
        return None if self._query_mask is None else self._query_mask.copy()

    # ---------------------------------------------------------------- helpers
    def _require_file(self, path: str, key: str) -> str:
        """Return ``path`` or raise FileNotFoundError naming the dataset and
        the argument (``key``) it came from."""
        if not osp.isfile(path):
            raise FileNotFoundError(
                f'{type(self).__name__}: {key} {path!r} not found '
                f'(data_root={self.data_root!r}, split={self.split!r})')
        return path

    def _read_lines(self, path: str, key: str) -> Iterable[Tuple[int, str]]:
        """Yield ``(line_number, stripped_line)`` of the non-blank lines of a
        text annotation file, line numbers 1-based."""
        self._require_file(path, key)
        check_utf8(path)
        with open(path, encoding='utf-8') as f:
            for lineno, line in enumerate(f, start=1):
                line = line.strip()
                if line:
                    yield lineno, line

    def _join_img(self, rel_path: str) -> str:
        return osp.join(self.img_prefix, rel_path)

    def _join_root(self, path: str) -> str:
        """A secondary annotation file's path, relative to ``data_root``."""
        return path if osp.isabs(path) or not self.data_root else osp.join(self.data_root, path)


def check_utf8(path: str) -> None:
    """Raise a ValueError naming the file, line and column of the first bytes of ``path``
    that are not UTF-8 (Python's own error gives only a byte offset)."""
    with open(path, 'rb') as f:
        data = f.read()
    try:
        data.decode('utf-8')
    except UnicodeDecodeError as err:
        lineno = data.count(b'\n', 0, err.start) + 1
        column = err.start - (data.rfind(b'\n', 0, err.start) + 1) + 1
        raise ValueError(f'{path}, line {lineno}, column {column}: byte '
                         f'0x{data[err.start]:02x} is not UTF-8 text ({err.reason}); '
                         'save the file as UTF-8') from None


def check_one_label_per_image(path: str, entries: Iterable[Tuple[int, str, Hashable]]) -> None:
    """Raise a ValueError naming both lines when an image path of the annotation file
    ``path`` is listed twice with different labels; ``entries`` are (line, image path,
    label). The same image twice with the same label is left alone."""
    first: Dict[str, Tuple[int, Hashable]] = {}
    for lineno, image, label in entries:
        key = osp.normpath(image)
        seen = first.setdefault(key, (lineno, label))
        if seen[1] != label:
            raise ValueError(f'{path}, lines {seen[0]} and {lineno}: {image!r} has the label '
                             f'{seen[1]!r} on line {seen[0]} and {label!r} on line {lineno}; '
                             'one image, one label')


def malformed(path: str, lineno: int, expected: str, line: str) -> ValueError:
    """The error for a line that does not have the expected format."""
    return ValueError(f'{path}, line {lineno}: expected {expected}, got {line!r}')


def iter_csv_rows(path: str, header: Sequence[str]):
    """Yield ``(line number, fields, line)`` of the non-empty data rows of a CSV file whose
    first line must be ``header``, each row having ``len(header)`` fields (else an error
    naming the file and line)."""
    expected_header = ','.join(header)
    check_utf8(path)
    with open(path, newline='', encoding='utf-8') as f:
        reader = csv.reader(f)
        for row in reader:
            lineno, line = reader.line_num, ','.join(row)
            if lineno == 1:
                if [c.strip() for c in row] != list(header):
                    raise malformed(path, lineno, f'the header "{expected_header}"', line)
            elif row:
                if len(row) != len(header):
                    raise malformed(path, lineno, f'{len(header)} fields "{expected_header}"',
                                    line)
                yield lineno, row, line


def parse_int(path: str, lineno: int, text: str, what: str, line: str) -> int:
    """``int(text)`` or a ValueError naming the file, line and field."""
    try:
        return int(text)
    except ValueError:
        raise malformed(path, lineno, f'an integer {what}', line) from None


def _sort_key(key: Hashable):
    # Ints sort numerically and before names; names sort as strings.
    return (0, key, '') if isinstance(key, (int, np.integer)) else (1, 0, str(key))

