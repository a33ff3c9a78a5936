import csv
import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import GLDv1NoisyDataset


def write_file(path, text):
    path.write_text(text)
    return str(path)


def rows(root):
    with open(osp.join(root, 'train.csv'), newline='') as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_parses_fixture(data_dir):
    root = osp.join(data_dir, 'gld', 'gldv1')
    ds = GLDv1NoisyDataset(data_root=root)
    expected = rows(root)
    _, labels = np.unique([int(r['landmark_id']) for r in expected], return_inverse=True)
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == \
        [osp.join(root, 'train', r['id'] + '.jpg') for r in expected]
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.metainfo['classes'] == (3, 7, 12)


@pytest.mark.slow
def test_skip_missing(data_dir):
    root = osp.join(data_dir, 'gld', 'gldv1')
    ds = GLDv1NoisyDataset(data_root=root, skip_missing=True)
    expected = [r for r in rows(root) if osp.isfile(osp.join(root, 'train', r['id'] + '.jpg'))]
    assert len(expected) == len(rows(root)) - 1
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == \
        [osp.join(root, 'train', r['id'] + '.jpg') for r in expected]
    assert all(osp.isfile(ds.get_data_info(i)['img_path']) for i in range(len(ds)))


@pytest.mark.slow
def test_unquoted_file(tmp_path):
    write_file(tmp_path / 'train.csv', 'id,url,landmark_id\n'
               '6e158a47eb2ca3f6,https://example.org/a.jpg,142820\n'
               '202cd79556f30760,http://example.org/b,104169\n')
    ds = GLDv1NoisyDataset(data_root=str(tmp_path))
    assert ds.get_gt_labels().tolist() == [1, 0]
    assert ds.get_data_info(1)['img_path'] == osp.join(str(tmp_path), 'train',
                                                       '202cd79556f30760.jpg')


@pytest.mark.parametrize('text, line, what', [
    ('id,landmark_id\n', 1, 'header'),
    ('id,url,landmark_id\nab,u,1\nab,u\n', 3, '3 fields'),
    ('id,url,landmark_id\nab,u,None\n', 2, 'integer landmark_id'),
    ('id,url,landmark_id\na/b,u,1\n', 2, 'alphanumeric image id'),
])
def test_malformed_lines(tmp_path, text, line, what):
    path = write_file(tmp_path / 'train.csv', text)
    with pytest.raises(ValueError, match=f'{path}, line {line}: expected .*{what}'):
        GLDv1NoisyDataset(data_root=str(tmp_path))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'GLDv1NoisyDataset: ann_file .*train\.csv'):
        GLDv1NoisyDataset(data_root=str(tmp_path))
