"""A user's own data listed in one CSV file."""
import csv
from typing import List, Optional

from irtbox.registry import DATASETS
from .base_dataset import BaseRetrievalDataset, malformed

_REQUIRED = ('path', 'label')
_TRUE, _FALSE = ('1', 'true', 'yes'), ('0', 'false', 'no')


@DATASETS.register_module()
class CSVDataset(BaseRetrievalDataset):
    """Images listed in a CSV file with a header row naming the columns
    ``path,label[,split][,is_query]`` (any order; other columns are ignored)::

        path,label,split,is_query
        images/a.jpg,cat,train,
        images/b.jpg,dog,test,true
        images/c.jpg,dog,test,false

    - ``path``: relative to ``data_prefix['img_path']`` (default
      ``data_root``), or absolute.
    - ``label``: any string. The labels of the selected rows are sorted
      (numerically when every label is an integer, else as strings) and
      mapped to ``0 .. C-1``; ``metainfo['classes']`` holds them in order.
    - ``split``: with ``split='x'`` only the rows whose split is ``x`` are
      kept; ``split=None`` keeps every row.
    - ``is_query``: ``1/true/yes`` or ``0/false/no`` (case-insensitive), or
      blank. When a selected row has a value, every selected row must have
      one and the split is a query/gallery split; when all are blank (e.g.
      training rows) no ``is_query`` is set (leave-one-out evaluation).

    Args:
        ann_file (str): The CSV file (required), relative to ``data_root``.
        split (str | None): Value of the ``split`` column to keep.
        **kwargs: See :class:`BaseRetrievalDataset`.
    """

    SPLITS = None

    def __init__(self, ann_file: str = '', split: Optional[str] = None, **kwargs):
        if not ann_file:
            raise ValueError('CSVDataset: ann_file (the CSV file) is required')
        super().__init__(ann_file=ann_file, split=split, **kwargs)

    def parse_samples(self) -> List[dict]:
        path = self._require_file(self.ann_file, 'ann_file')
        with open(path, newline='', encoding='utf-8') as f:
            reader = csv.DictReader(f, skipinitialspace=True)
            columns = [c.strip() for c in reader.fieldnames or []]
            missing = [c for c in _REQUIRED if c not in columns]
            if missing:
                raise malformed(path, 1, 'a header with the columns path,label'
                                '[,split][,is_query]', ','.join(columns))
            reader.fieldnames = columns
            if self.split is not None and 'split' not in columns:
                raise ValueError(f'CSVDataset: split={self.split!r} was asked for '
                                 f'but {path} has no split column')
            rows, splits = [], set()
            for row in reader:
                lineno = reader.line_num
                if None in row or any(row.get(c) is None for c in columns):
                    raise malformed(path, lineno, f'{len(columns)} fields '
                                    f'({",".join(columns)})', _raw(row))
                row = {k: v.strip() for k, v in row.items()}
                if not row['path'] or not row['label']:
                    raise malformed(path, lineno, 'a non-empty path and label', _raw(row))
                splits.add(row.get('split'))
                if self.split is None or row['split'] == self.split:
                    rows.append((lineno, row))
        if not rows:
            raise ValueError(f'CSVDataset: no rows with split {self.split!r} in '
                             f'{path} (splits found: {sorted(splits)})')
        return self._to_samples(path, rows)

    def _to_samples(self, path: str, rows: list) -> List[dict]:
        labels = [row['label'] for _, row in rows]
        if all(_is_int(label) for label in labels):
            labels = [int(label) for label in labels]
        has_query = any(row.get('is_query') for _, row in rows)
        samples = []
        for (lineno, row), label in zip(rows, labels):
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


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _raw(row: dict) -> str:
    """The row as CSV text again, extra fields (key None) included."""
    values = []
    for key, value in row.items():
        if key is None:
            values.extend(value)
        elif value is not None:
            values.append(value)
    return ','.join(values)
