"""A user's own data listed in one CSV file."""
import csv
import os.path as osp
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from irtbox.registry import DATASETS
from irtbox.utils.checks import check_int
from .base_dataset import (TEXT_ENCODING, BaseRetrievalDataset, check_unique_images,
                           check_utf8, is_int_text, malformed, warn_int_spellings)
from .miniature import ImageFn, class_names, write_image, write_text
from .spec import DatasetSpec

__all__ = ['CSVDataset', 'write_csv']

_REQUIRED = ('path', 'label')
_JUNK_COLUMNS = ('query_path', 'gallery_path')
_TRUE, _FALSE = ('1', 'true', 'yes'), ('0', 'false', 'no')
LABEL_TYPES = ('str', 'int')

CSV_ANN_FILE, CSV_JUNK_FILE = 'annotations.csv', 'junk.csv'


def write_csv(root: str, image_fn: ImageFn, classes: int = 8, per_class: int = 4,
              plan: Optional[dict] = None, junk: Sequence[Tuple[str, str]] = ()) -> None:
    """``annotations.csv`` (``path,label,split,is_query``), images ``images/<label>_<k>.png``, and
    ``junk.csv`` (``query_path,gallery_path``, the pairs ``junk``, written as the ``path`` column).

    ``plan``: ``{split: [(label, [is_query of each image])]}``, an ``is_query``
    being True, False or None (left blank). Default: ``classes`` labels in ``train`` (blank
    ``is_query``), ``classes`` others in ``test`` whose first half of images are queries and the
    rest gallery (``per_class`` >= 2, so both).
    """
    if plan is None:
        check_int(per_class, 'per_class', 2)
        queries = per_class // 2
        flags = {'train': [None] * per_class,
                 'test': [True] * queries + [False] * (per_class - queries)}
        plan = {split: [(name, flags[split]) for name in names]
                for split, names in class_names(classes).items()}
    rows = ['path,label,split,is_query']
    class_index = 0
    for split, labels in plan.items():
        for label, is_query in labels:
            for k, flag in enumerate(is_query):
                rel = f'images/{label}_{k}.png'
                write_image(osp.join(root, rel), image_fn(class_index, k))
                rows.append(f'{rel},{label},{split},{"" if flag is None else str(flag).lower()}')
            class_index += 1
    write_text(osp.join(root, CSV_ANN_FILE), rows)
    write_text(osp.join(root, CSV_JUNK_FILE),
               ['query_path,gallery_path', *(f'{q},{g}' for q, g in junk)])


def _point_at_csv(cfg: dict, root: str) -> None:
    """The miniature's annotation file (``ann_file`` has no default), and its junk list for
    a config that reads one."""
    cfg.update(data_root=root, ann_file=CSV_ANN_FILE, data_prefix=None)
    if cfg.get('junk_file'):
        cfg['junk_file'] = CSV_JUNK_FILE


@DATASETS.register_module()
class CSVDataset(BaseRetrievalDataset):
    """Images listed in a CSV file with a header row naming the columns
    ``path,label[,split][,is_query]`` (any order; other columns are ignored)::

        path,label,split,is_query
        images/a.jpg,cat,train,
        images/b.jpg,dog,test,true
        images/c.jpg,dog,test,false

    The column rules are in docs/protocols.md, "Your own data": ``path`` relative to
    ``data_prefix['img_path']`` (default ``data_root``) or absolute; ``label`` text
    (``label_type='str'``) or integer (``'int'``), sorted and mapped to ``0 .. C-1``
    (``metainfo['classes']``); ``split`` selects rows; ``is_query`` set on all selected rows
    (query/gallery) or on none (leave-one-out). Each image once per split, one label across
    splits; a UTF-8 byte-order mark is accepted.

    ``junk_file`` (header ``query_path,gallery_path``, paths as in ``ann_file``): gallery images
    to ignore per query. Lines not both in the selected split are skipped (one file serves
    several splits); an unknown path or a swapped role is an error. It becomes
    ``metainfo['junk']``, ``{query sample index: [gallery sample index, ...]}``, read by
    :class:`~irtbox.evaluation.RetrievalMetric` for ``map@all``.

    Args:
        ann_file (str): The CSV file (required), relative to ``data_root``.
        split (str | None): Value of the ``split`` column to keep.
        junk_file (str | None): The junk CSV, relative to ``data_root``.
        label_type (str): ``'str'`` or ``'int'``.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    specs = (DatasetSpec(name='csv', miniature=write_csv, point=_point_at_csv), )

    SPLITS = None

    def __init__(self,
                 ann_file: str = '',
                 split: Optional[str] = None,
                 junk_file: Optional[str] = None,
                 label_type: str = 'str',
                 **kwargs):
        if not ann_file:
            raise ValueError('CSVDataset: ann_file (the CSV file) is required')
        if label_type not in LABEL_TYPES:
            raise ValueError(f'CSVDataset: label_type must be one of {list(LABEL_TYPES)}, '
                             f'got {label_type!r}')
        self.label_type = label_type
        self.junk_file = junk_file
        # (query img_path, gallery img_path) of the split; sample indices are
        # resolved when the labels are cached, so subsets stay right.
        self._junk_pairs: List[Tuple[str, str]] = []
        super().__init__(ann_file=ann_file, split=split, **kwargs)

    def parse_samples(self) -> List[dict]:
        path = self._require_file(self.ann_file, 'ann_file')
        columns, lines = _read_csv(path, _REQUIRED, 'path,label[,split][,is_query]')
        if self.split is not None and 'split' not in columns:
            raise ValueError(f'CSVDataset: split={self.split!r} was asked for '
                             f'but {path} has no split column')
        rows, splits, entries = [], set(), []  # entries: (line, path, label) of all splits
        for lineno, row in lines:
            row = {k: v.strip() for k, v in row.items()}
            if not row['path'] or not row['label'] or row['label'].lower() == 'nan':
                raise malformed(path, lineno, 'a non-empty path and label (not NaN)', _raw(row))
            splits.add(row.get('split'))
            label = self._label_key(path, lineno, row)
            entries.append((lineno, row['path'], label))
            if self.split is None or row['split'] == self.split:
                rows.append((lineno, row, label))
        check_unique_images(((path, n, image, label) for n, image, label in entries),
                            same_label_ok=True)
        if not rows:
            raise ValueError(f'CSVDataset: no rows with split {self.split!r} in '
                             f'{path} (splits found: {sorted(splits)})')
        check_unique_images(((path, n, row['path'], label) for n, row, label in rows),
                            self.split)
        if self.label_type == 'str':
            warn_int_spellings(((path, n, label) for n, _, label in rows), 'label',
                               "if they are one class, set label_type='int' (labels are "
                               'integers) or write them one way')
        samples = self._to_samples(path, rows)
        if self.junk_file:
            all_paths = {osp.normpath(image) for _, image, _ in entries}
            self._junk_pairs = self._read_junk(path, rows, samples, all_paths)
        return samples

    def _label_key(self, path: str, lineno: int, row: dict) -> Hashable:
        """The class key of a row: its label text, or with label_type='int' the integer."""
        text = row['label']
        if self.label_type == 'str':
            return text
        if not is_int_text(text):
            raise malformed(path, lineno, "an integer label (label_type='int')", _raw(row))
        return int(text)

    def sort_classes(self, keys: Iterable[Hashable]) -> List[Hashable]:
        """Integer labels numerically (as text, ``'05'`` before ``'5'``), else as strings."""
        keys = list(keys)
        if all(isinstance(k, str) and is_int_text(k) for k in keys):
            return sorted(keys, key=lambda k: (int(k), k))
        return super().sort_classes(keys)

    def _read_junk(self, ann_path: str, rows: list, samples: List[dict],
                   all_paths: set) -> List[Tuple[str, str]]:
        """The junk file's (query img_path, gallery img_path) pairs within the split."""
        path = self._require_file(self._join_root(self.junk_file), 'junk_file')
        _, lines = _read_csv(path, _JUNK_COLUMNS, ','.join(_JUNK_COLUMNS))
        in_split: Dict[str, List[dict]] = {}
        for (_, row, _), sample in zip(rows, samples):
            in_split.setdefault(osp.normpath(row['path']), []).append(sample)
        pairs = {}
        for lineno, row in lines:
            pair = []
            for column, want_query in (('query_path', True), ('gallery_path', False)):
                rel = osp.normpath(row[column].strip())
                if rel not in all_paths:
                    raise ValueError(f'{path}, line {lineno}: {column} {row[column]!r} is '
                                     f'not a path of ann_file {ann_path}')
                matches = in_split.get(rel, [])
                if len(matches) > 1:
                    raise ValueError(f'{path}, line {lineno}: {column} {row[column]!r} is '
                                     f'in {len(matches)} rows of {ann_path} (split '
                                     f'{self.split!r}); expected one image per path')
                is_query = matches[0].get('is_query') if matches else None
                if is_query is not None and is_query != want_query:
                    raise ValueError(
                        f'{path}, line {lineno}: {column} {row[column]!r} is a '
                        f'{"gallery" if want_query else "query"} image (is_query='
                        f'{str(is_query).lower()}) in {ann_path}; expected a '
                        f'{"query" if want_query else "gallery"} image')
                pair.append(matches[0]['img_path'] if matches else None)
            if None not in pair:
                pairs[tuple(pair)] = None
        return list(pairs)

    def _cache_labels(self):
        super()._cache_labels()
        if self.junk_file:
            index_of = {self.get_data_info(i)['img_path']: i for i in range(len(self))}
            junk: Dict[int, List[int]] = {}
            for query, gallery in self._junk_pairs:
                if query in index_of and gallery in index_of:
                    junk.setdefault(index_of[query], []).append(index_of[gallery])
            self._metainfo['junk'] = junk

    def _to_samples(self, path: str, rows: list) -> List[dict]:
        has_query = any(row.get('is_query') for _, row, _ in rows)
        samples = []
        for lineno, row, label in rows:
            sample = dict(img_path=self._join_img(row['path']), gt_label=label)
            if has_query:
                value = row['is_query'].lower()
                if value not in _TRUE + _FALSE:
                    raise malformed(path, lineno, 'is_query 1/true/yes or 0/false/no '
                                    '(every row of a split with queries needs one)',
                                    _raw(row))
                sample['is_query'] = value in _TRUE
            samples.append(sample)
        return samples


def _read_csv(path: str, required: Sequence[str], header: str) -> Tuple[list, list]:
    """The columns (header names) and the (line number, row dict) of the rows of a CSV file
    whose header has the columns ``required``; a row without one field per column is an
    error naming its line."""
    check_utf8(path)
    with open(path, newline='', encoding=TEXT_ENCODING) as f:
        reader = csv.DictReader(f, skipinitialspace=True)
        columns = [c.strip() for c in reader.fieldnames or []]
        if any(c not in columns for c in required):
            raise malformed(path, 1, f'a header with the columns {header}', ','.join(columns))
        reader.fieldnames = columns
        rows = []
        for row in reader:
            if None in row or any(row.get(c) is None for c in columns):
                raise malformed(path, reader.line_num, f'{len(columns)} fields '
                                f'({",".join(columns)})', _raw(row))
            rows.append((reader.line_num, row))
    return columns, rows


def _raw(row: dict) -> str:
    """The row as CSV text again, extra fields (key None) included."""
    values = []
    for key, value in row.items():
        if key is None:
            values.extend(value)
        elif value is not None:
            values.append(value)
    return ','.join(values)
