import csv
import os.path as osp

import pytest

from irtbox.datasets import CSVDataset


def index_of(ds):
    return {ds.get_data_info(i)['img_path']: i for i in range(len(ds))}


def expected_junk(ds, root, split_paths):
    """The fixture junk file's lines whose two paths are in the split, as sample indices."""
    idx = index_of(ds)
    junk = {}
    with open(osp.join(root, 'junk.csv'), newline='') as f:
        for row in csv.DictReader(f):
            if row['query_path'] in split_paths and row['gallery_path'] in split_paths:
                q = idx[osp.join(root, row['query_path'])]
                junk.setdefault(q, []).append(idx[osp.join(root, row['gallery_path'])])
    return junk


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_junk_fixture(data_dir, split):
    root = osp.join(data_dir, 'csv')
    ds = CSVDataset(data_root=root, ann_file='annotations.csv', split=split, junk_file='junk.csv')
    with open(osp.join(root, 'annotations.csv'), newline='') as f:
        split_paths = {r['path'] for r in csv.DictReader(f) if r['split'] == split}
    junk = ds.metainfo['junk']
    assert junk and junk == expected_junk(ds, root, split_paths)
    mask = ds.get_query_mask()
    if mask is not None:  # queries map to gallery items
        assert all(mask[q] and not any(mask[g] for g in gs) for q, gs in junk.items())


@pytest.mark.slow
def test_no_junk_file_no_junk_key(data_dir):
    ds = CSVDataset(data_root=osp.join(data_dir, 'csv'), ann_file='annotations.csv', split='test')
    assert 'junk' not in ds.metainfo


def write(tmp_path, junk_text):
    (tmp_path / 'a.csv').write_text('path,label,split,is_query\n'
                                    'q1.png,1,test,true\n'
                                    'g1.png,1,test,false\n'
                                    'g2.png,2,test,false\n'
                                    'q2.png,2,test,true\n'
                                    't.png,1,train,\n')
    (tmp_path / 'junk.csv').write_text(junk_text)


@pytest.mark.slow
def test_junk_indices_and_normalised_paths(tmp_path):
    write(tmp_path, 'gallery_path,query_path\n'
          'g2.png,q1.png\n'
          './g1.png,q2.png\n'
          'g2.png,q1.png\n'  # a repeat
          't.png,q1.png\n')  # train image: not in this split, skipped
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv', split='test', junk_file='junk.csv')
    assert ds.metainfo['junk'] == {0: [2], 3: [1]}
    # A subset renumbers the samples; pairs that lost a member are dropped.
    sub = ds.get_subset([3, 1, 0])
    assert sub.metainfo['junk'] == {0: [1]}


@pytest.mark.slow
def test_junk_in_leave_one_out_split(tmp_path):
    (tmp_path / 'a.csv').write_text('path,label\na.png,1\nb.png,1\nc.png,2\n')
    (tmp_path / 'junk.csv').write_text('query_path,gallery_path\nc.png,a.png\na.png,b.png\n')
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv', junk_file='junk.csv')
    assert ds.metainfo['junk'] == {2: [0], 0: [1]}


@pytest.mark.parametrize('text, message', [
    ('query,gallery\nq1.png,g1.png\n',
     r'line 1: expected a header with the columns query_path,gallery_path'),
    ('query_path,gallery_path\nq1.png\n', r"line 2: expected 2 fields .* got 'q1.png'"),
    ('query_path,gallery_path\nq1.png,g1.png\nq1.png,nope.png\n',
     r"line 3: gallery_path 'nope.png' is not a path of ann_file .*a\.csv"),
    ('query_path,gallery_path\nmissing.png,g1.png\n',
     r"line 2: query_path 'missing.png' is not a path of ann_file"),
    ('query_path,gallery_path\ng1.png,g2.png\n',
     r"line 2: query_path 'g1.png' is a gallery image \(is_query=false\) in .*a\.csv; "
     r'expected a query image'),
    ('query_path,gallery_path\nq1.png,q2.png\n',
     r"line 2: gallery_path 'q2.png' is a query image \(is_query=true\)"),
])
def test_junk_errors(tmp_path, text, message):
    write(tmp_path, text)
    with pytest.raises(ValueError, match=r'junk\.csv, ' + message):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv', split='test', junk_file='junk.csv')


def test_junk_path_in_two_rows(tmp_path):
    # An image in two rows of one split is refused by the annotation already.
    (tmp_path / 'a.csv').write_text('path,label\na.png,1\na.png,1\nb.png,2\n')
    (tmp_path / 'junk.csv').write_text('query_path,gallery_path\nb.png,a.png\n')
    with pytest.raises(ValueError, match=r"a\.csv, lines 2 and 3: 'a.png' is listed twice"):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv', junk_file='junk.csv')


def test_junk_file_missing(tmp_path):
    write(tmp_path, '')
    with pytest.raises(FileNotFoundError, match=r'CSVDataset: junk_file .*nope\.csv'):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv', split='test', junk_file='nope.csv')
