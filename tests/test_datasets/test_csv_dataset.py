import csv
import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import CSVDataset


def csv_rows(root):
    with open(osp.join(root, 'annotations.csv'), newline='') as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_csv_parses_fixture(data_dir, split):
    root = osp.join(data_dir, 'csv')
    ds = CSVDataset(data_root=root, ann_file='annotations.csv', split=split)
    rows = [r for r in csv_rows(root) if r['split'] == split]
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [d['img_path'] for d in infos] == [osp.join(root, r['path']) for r in rows]
    assert all(osp.isfile(d['img_path']) for d in infos)
    names, labels = np.unique([r['label'] for r in rows], return_inverse=True)
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.metainfo['classes'] == tuple(names)
    if split == 'train':  # blank is_query: leave-one-out
        assert ds.get_query_mask() is None
    else:
        np.testing.assert_array_equal(ds.get_query_mask(), [r['is_query'] == 'true' for r in rows])


@pytest.mark.slow
def test_csv_all_rows_and_numeric_labels(tmp_path):
    (tmp_path / 'a.csv').write_text('label,path\n10,x/1.png\n9,x/2.png\n10,x/3.png\n100,x/4.png\n')
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv')
    # integer labels sort numerically: 9 -> 0, 10 -> 1, 100 -> 2; they stay strings
    assert ds.get_gt_labels().tolist() == [1, 0, 1, 2]
    assert ds.metainfo['classes'] == ('9', '10', '100')
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv', label_type='int')
    assert ds.get_gt_labels().tolist() == [1, 0, 1, 2]
    assert ds.metainfo['classes'] == (9, 10, 100)
    assert ds.get_data_info(1)['img_path'] == osp.join(str(tmp_path), 'x/2.png')


@pytest.mark.slow
def test_csv_string_labels_sorted(tmp_path):
    (tmp_path / 'a.csv').write_text('path,label\n1.png,b\n2.png,10\n3.png,a\n4.png,9\n')
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv')
    # not all integers: string order '10' < '9' < 'a' < 'b'
    assert ds.get_gt_labels().tolist() == [3, 0, 2, 1]


@pytest.mark.parametrize('text, message', [
    ('file,label\na.png,1\n', r'line 1: expected a header with the columns path,label'),
    ('path,label\na.png,1\nb.png\n', r'line 3: expected 2 fields \(path,label\), got \'b.png\''),
    ('path,label\na.png,1,extra\n',
     r"line 2: expected 2 fields \(path,label\), got 'a.png,1,extra'"),
    ('path,label\na.png,\n', r'line 2: expected a non-empty path and label'),
    ('path,label,is_query\na.png,1,true\nb.png,1,maybe\n', r'line 3: expected is_query 1/true/yes'),
    ('path,label,is_query\na.png,1,true\nb.png,1,\n', r'line 3: expected is_query'),
])
def test_csv_malformed(tmp_path, text, message):
    (tmp_path / 'a.csv').write_text(text)
    with pytest.raises(ValueError, match=r'a\.csv, ' + message):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv')


def test_csv_split_errors(tmp_path):
    (tmp_path / 'a.csv').write_text('path,label\na.png,1\n')
    with pytest.raises(ValueError, match=r"split='train' was asked for but .*a\.csv has no split"):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv', split='train')
    (tmp_path / 'b.csv').write_text('path,label,split\na.png,1,train\nb.png,1,val\n')
    with pytest.raises(ValueError, match=r"no rows with split 'test' in .*b\.csv "
                       r"\(splits found: \['train', 'val'\]\)"):
        CSVDataset(data_root=str(tmp_path), ann_file='b.csv', split='test')


def test_csv_missing_file(tmp_path):
    with pytest.raises(ValueError, match='ann_file .* is required'):
        CSVDataset(data_root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r'CSVDataset: ann_file .*nope\.csv'):
        CSVDataset(data_root=str(tmp_path), ann_file='nope.csv')
