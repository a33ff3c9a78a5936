"""Shared logic of the retrieval datasets: reading annotation files with clear
errors, remapping labels to contiguous ids, and cheap access to the labels."""
import csv
import logging
import os.path as osp
import re
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
from mmengine.dataset import BaseDataset
from mmengine.logging import print_log

from irtbox.utils.fileio import read_json

__all__ = ['BaseRetrievalDataset', 'image_prefix', 'read_lines', 'check_utf8',
           'check_unique_images', 'check_int_spellings', 'warn_int_spellings', 'is_int_text',
           'malformed', 'iter_csv_rows', 'parse_int']

# Text files are read with 'utf-8-sig': a UTF-8 byte-order mark (Excel's "CSV UTF-8",
# Notepad) is dropped instead of becoming part of the first header name or field.
TEXT_ENCODING = 'utf-8-sig'


class BaseRetrievalDataset(BaseDataset):
    """Base class of the image-retrieval datasets (an MMEngine ``BaseDataset``).

    Subclasses implement :meth:`parse_samples`, which returns one dict per image with ``img_path``
    (already joined with the image prefix) and ``gt_label`` holding the *original* class key (an int
    id or a name), plus optional ``is_query`` / ``bbox``. This class refuses an empty split, maps
    the sorted class keys (:meth:`sort_classes`; never converted: ``'05'`` and ``'5'`` are two
    classes) to labels ``0 .. num_classes - 1`` (keys in ``metainfo['classes']``), and caches
    the labels so samplers and metrics need no image (:meth:`get_gt_labels`,
    :meth:`get_query_mask`).

    Args:
        split (str | None): Which part to load; valid values in the subclass's ``SPLITS``
            (``None`` there: any).
        data_root (str): Root folder; relative ``ann_file`` and ``data_prefix`` join it.
        ann_file (str): Annotation file; ``''``: the subclass default (may depend on split).
        data_prefix (dict | None): ``dict(img_path=...)``, the folder image paths are relative
            to; ``None``: the subclass's ``DEFAULT_IMG_PREFIX``.
        test_mode (bool): MMEngine's flag: a transform returning ``None`` is then an error.
        exclude_classes (Sequence | str | None): class keys (as the split writes them: ``5`` and
            ``'5'`` differ) whose images are left out before the labels are numbered, or the path
            of a JSON file holding such a list (the overlap check's ``exclude_classes.json``);
            a key the split lacks is an error.
        **kwargs: Passed to ``mmengine.dataset.BaseDataset``.
    """

    SPLITS: Optional[Tuple[str, ...]] = ('train', 'test')
    DEFAULT_IMG_PREFIX = ''
    DEFAULT_ANN_FILE = ''

    def __init__(self,
                 split: Optional[str] = 'train',
                 data_root: str = '',
                 ann_file: str = '',
                 data_prefix: Optional[dict] = None,
                 pipeline: Sequence = (),
                 test_mode: bool = False,
                 lazy_init: bool = False,
                 exclude_classes: Union[Sequence[Hashable], str, None] = None,
                 **kwargs):
        if self.SPLITS is not None and split not in self.SPLITS:
            raise ValueError(f'{type(self).__name__}: split must be one of '
                             f'{list(self.SPLITS)}, got {split!r}')
        self.split = split
        self.exclude_classes = exclude_classes
        self._gt_labels: Optional[np.ndarray] = None
        self._query_mask: Optional[np.ndarray] = None
        super().__init__(
            ann_file=ann_file or self.default_ann_file(split),
            data_root=data_root,
            data_prefix=image_prefix(type(self).__name__, data_prefix, self.DEFAULT_IMG_PREFIX),
            pipeline=list(pipeline),
            test_mode=test_mode,
            lazy_init=lazy_init,
            **kwargs)

    # ----------------------------------------------------------- subclass API
    def default_ann_file(self, split: Optional[str]) -> str:
        """The annotation file used when ``ann_file`` is not given: ``DEFAULT_ANN_FILE`` with
        ``{split}`` replaced by the split."""
        return self.DEFAULT_ANN_FILE.format(split=split)

    def parse_samples(self) -> List[dict]:
        """Read the annotation and return the samples of ``self.split`` with
        their original class keys in ``gt_label``; each dataset class defines it."""
        raise TypeError(f'{type(self).__name__} does not define parse_samples(); a retrieval '
                        'dataset must read its annotation there')

    def sort_classes(self, keys: Iterable[Hashable]) -> List[Hashable]:
        """The class keys of the split in label order: ints numerically and before
        strings, strings in string order."""
        return sorted(keys, key=_sort_key)

    # ------------------------------------------------------------ MMEngine API
    def load_data_list(self) -> List[dict]:
        samples = self.parse_samples()
        if samples and self.exclude_classes is not None:
            samples = self._without_excluded(samples)
        if not samples:
            raise ValueError(f'{type(self).__name__}: split {self.split!r} is '
                             f'empty (annotation: {self.ann_file!r})')
        nan = [s for s in samples
               if isinstance(s['gt_label'], float) and s['gt_label'] != s['gt_label']]
        if nan:  # each NaN a class of its own in a set, one class in NumPy: no class at all
            raise ValueError(f'{type(self).__name__} ({self.ann_file}): the label of '
                             f'{nan[0].get("img_path")} is NaN ({len(nan)} of {len(samples)} '
                             'samples are); expected a class for every image (NaN is no class)')
        keys = self.sort_classes({s['gt_label'] for s in samples})
        label_of = {k: i for i, k in enumerate(keys)}
        for s in samples:
            s['gt_label'] = label_of[s['gt_label']]
        self._metainfo['classes'] = tuple(keys)
        return samples

    def _without_excluded(self, samples: List[dict]) -> List[dict]:
        name, excluded = type(self).__name__, self.exclude_classes
        if isinstance(excluded, str):
            if not osp.isfile(excluded):
                raise FileNotFoundError(f'{name}: exclude_classes: {excluded} not found')
            excluded = read_json(excluded)
        if not isinstance(excluded, (list, tuple)) or not all(
                isinstance(k, (int, str)) for k in excluded):
            raise ValueError(f'{name}: exclude_classes: expected a list of class keys (ints or '
                             f'strings) or a JSON file holding one, got {str(excluded)[:80]}')
        excluded = set(excluded)
        unknown = sorted(excluded - {s['gt_label'] for s in samples}, key=_sort_key)
        if unknown:
            raise ValueError(f'{name}: exclude_classes: {len(unknown)} class'
                             f'{"es" if len(unknown) > 1 else ""} not in split {self.split!r}: '
                             f'{unknown[:5]} (keys are compared as written: 5 and \'5\' differ)')
        kept = [s for s in samples if s['gt_label'] not in excluded]
        print_log(f'{name}: exclude_classes left out {len(excluded)} classes, '
                  f'{len(samples) - len(kept)} images of split {self.split!r}', logger='current')
        return kept

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
        # Read once from the (possibly serialised) list: samplers and metrics need them. Over
        # the samples (BaseDataset's len(): SfM120kDataset's counts tuples in tuple mode).
        infos = [self.get_data_info(i) for i in range(BaseDataset.__len__(self))]
        self._gt_labels = np.array([d['gt_label'] for d in infos], dtype=np.int64)
        self._query_mask = None
        if not any('is_query' in d for d in infos):
            return
        self._query_mask = np.array([bool(d.get('is_query', False)) for d in infos])
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
        text annotation file, line numbers 1-based (a UTF-8 byte-order mark is dropped)."""
        return read_lines(self._require_file(path, key))

    def _join_img(self, rel_path: str) -> str:
        return osp.join(self.data_prefix['img_path'], rel_path)

    def _join_root(self, path: str) -> str:
        """A secondary annotation file's path, relative to ``data_root``."""
        return path if osp.isabs(path) or not self.data_root else osp.join(self.data_root, path)


def image_prefix(owner: str, data_prefix: Optional[dict], default: str) -> dict:
    """``data_prefix``, or ``dict(img_path=default)`` for None; else an error unless it is a
    dict with ``img_path``."""
    if data_prefix is None:
        return dict(img_path=default)
    if not isinstance(data_prefix, dict) or 'img_path' not in data_prefix:
        raise ValueError(f'{owner}: data_prefix must be a dict with the key '
                         f"'img_path' (the image folder), got {data_prefix!r}")
    return data_prefix


def read_lines(path: str) -> List[Tuple[int, str]]:
    """``(line_number, stripped_line)`` of the non-blank lines of the UTF-8 text file
    ``path``, 1-based (a byte-order mark is dropped; other bytes that are not UTF-8 are an
    error naming the line)."""
    check_utf8(path)
    with open(path, encoding=TEXT_ENCODING) as f:
        return [(n, line.strip()) for n, line in enumerate(f, start=1) if line.strip()]


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


Location = Union[int, str]


def check_unique_images(entries: Iterable[Tuple[str, Location, str, Hashable]],
                        split: Optional[str] = None, same_label_ok: bool = False) -> None:
    """Raise a ValueError naming both places when an image is listed twice in one split:
    ``entries`` are (file, line number or a place such as ``'annotations[3]'``, image path,
    label), paths compared normalised. A repeated row would count its image twice in every
    metric. With ``same_label_ok`` (all the splits of one file) only two labels are an error.

    Error (the same file)::

        PATH, lines 2 and 5: 'a.png' is listed twice in split 'test' (label 'cat' both
        times); expected each image once: ...
    """
    first: Dict[str, Tuple[str, Location, Hashable]] = {}
    for path, where, image, label in entries:
        key = osp.normpath(image)
        if key not in first:
            first[key] = (path, where, label)
            continue
        path0, where0, label0 = first[key]
        if label0 != label:
            at = _two_places(path0, where0, path, where)
            raise ValueError(f'{at}: {image!r} has the label {label0!r} on {_place(where0)} '
                             f'and {label!r} on {_place(where)}; one image, one label')
        if not same_label_ok:
            scope = '' if split is None else f' in split {split!r}'
            raise ValueError(
                f'{_two_places(path0, where0, path, where)}: {image!r} is listed twice{scope} '
                f'(label {label!r} both times); expected each image once: a repeated row '
                'counts the image twice in every metric (a query finds its own copy at '
                'rank 1). Remove one of the two.')


def _place(where: Location) -> str:
    return f'line {where}' if isinstance(where, int) else str(where)


def _two_places(path0: str, where0: Location, path: str, where: Location) -> str:
    if path0 == path and isinstance(where0, int) and isinstance(where, int):
        return f'{path}, lines {where0} and {where}'
    if path0 == path:
        return f'{path}, {_place(where0)} and {_place(where)}'
    return f'{path0}, {_place(where0)} and {path}, {_place(where)}'


_INT_TEXT = re.compile(r'[+-]?[0-9]+')


def is_int_text(text: str) -> bool:
    """Whether ``text`` is an integer written in ASCII digits (an optional sign)."""
    return _INT_TEXT.fullmatch(text) is not None


def _int_spellings(entries: Iterable[Tuple[str, Location, str]]):
    """The first two different texts of one integer: ((path, where, text), (path, where,
    text), number of integers written more than one way), or None."""
    first: Dict[int, Tuple[str, Location, str]] = {}
    clash, clashing = None, set()
    for path, where, text in entries:
        if not is_int_text(text):
            continue
        seen = first.setdefault(int(text), (path, where, text))
        if seen[2] != text:
            clashing.add(int(text))
            clash = clash or (seen, (path, where, text))
    return None if clash is None else (*clash, len(clashing))


def check_int_spellings(entries: Iterable[Tuple[str, Location, str]], what: str,
                        why: str) -> None:
    """For a format whose labels are integers: raise a ValueError naming both places when
    one integer is written two ways (``'05'`` and ``'5'``), which the format cannot mean as
    two classes nor, written so, as one. ``entries``: (file, line, label text)."""
    clash = _int_spellings(entries)
    if clash:
        (p0, w0, t0), (p1, w1, t1), _ = clash
        raise ValueError(f'{_two_places(p0, w0, p1, w1)}: the {what}s {t0!r} and {t1!r} are '
                         f'the same integer {int(t0)} written two ways; {why}. Write it one '
                         'way.')


def warn_int_spellings(entries: Iterable[Tuple[str, Location, str]], what: str,
                       advice: str) -> None:
    """For string labels: warn (naming both places) when two labels are the same integer
    written two ways (``'05'`` and ``'5'``): they are two classes, maybe not meant so."""
    clash = _int_spellings(entries)
    if clash:
        (p0, w0, t0), (p1, w1, t1), count = clash
        more = f' ({count} integers are written more than one way)' if count > 1 else ''
        print_log(f'{_two_places(p0, w0, p1, w1)}: the {what}s {t0!r} and {t1!r} are two '
                  f'different classes (a {what} is its text){more}; {advice}',
                  logger='current', level=logging.WARNING)


def malformed(path: str, lineno: int, expected: str, line: str) -> ValueError:
    """The error for a line that does not have the expected format."""
    return ValueError(f'{path}, line {lineno}: expected {expected}, got {line!r}')


def iter_csv_rows(path: str, header: Sequence[str]):
    """Yield ``(line number, fields, line)`` of the non-empty data rows of a CSV file whose
    first line must be ``header``, each row having ``len(header)`` fields (else an error
    naming the file and line). A UTF-8 byte-order mark (Excel's CSV) is dropped."""
    expected_header = ','.join(header)
    check_utf8(path)
    with open(path, newline='', encoding=TEXT_ENCODING) as f:
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

