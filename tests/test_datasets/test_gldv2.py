import csv
import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import GLDv2CleanDataset


def write_file(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.slow
def test_parses_fixture(data_dir):
    root = osp.join(data_dir, 'gld', 'gldv2')
    ds = GLDv2CleanDataset(data_root=root)
    # independently: every id of every row, nested by its first three characters
    paths, landmarks = [], []
    with open(osp.join(root, 'train_clean.csv'), newline='') as f:
        for row in csv.DictReader(f):
            for i in row['images'].split(' '):
                paths.append(osp.join(root, 'train', i[0], i[1], i[2], i + '.jpg'))
                landmarks.append(int(row['landmark_id']))
    _, labels = np.unique(landmarks, return_inverse=True)
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == paths
    assert all(osp.isfile(p) for p in paths)
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.metainfo['classes'] == (4, 17, 1032) and ds.num_classes == 3
    assert len(ds) == 14 and ds.get_query_mask() is None


@pytest.mark.slow
def test_labels_follow_landmark_order_and_prefix(tmp_path):
    write_file(tmp_path / 'train_clean.csv',
               'landmark_id,images\n9,abc1 abc2\n2,def3\n')
    ds = GLDv2CleanDataset(data_root=str(tmp_path), data_prefix=dict(img_path='imgs'))
    assert ds.get_gt_labels().tolist() == [1, 1, 0]
    assert ds.get_data_info(2)['img_path'] == osp.join(str(tmp_path), 'imgs', 'd', 'e', 'f',
                                                       'def3.jpg')


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'GLDv2CleanDataset: ann_file .*train_clean'):
        GLDv2CleanDataset(data_root=str(tmp_path))


@pytest.mark.parametrize('text, line, what', [
    ('landmark_id,id\n1,abc\n', 1, 'header'),
    ('landmark_id,images\n1,abc\n2,def,ghi\n', 3, '2 fields'),
    ('landmark_id,images\nx,abc\n', 2, 'integer landmark_id'),
    ('landmark_id,images\n1,\n', 2, 'at least one image id'),
    ('landmark_id,images\n1,abc ab\n', 2, "not 'ab'"),
])
def test_malformed_lines(tmp_path, text, line, what):
    path = write_file(tmp_path / 'train_clean.csv', text)
    with pytest.raises(ValueError, match=f'{path}, line {line}: expected .*{what}'):
        GLDv2CleanDataset(data_root=str(tmp_path))


def test_duplicate_image(tmp_path):
    path = write_file(tmp_path / 'train_clean.csv', 'landmark_id,images\n1,abc\n2,def abc\n')
    with pytest.raises(ValueError, match=f"{path}, line 3: image 'abc' is already listed on "
                       'line 2'):
        GLDv2CleanDataset(data_root=str(tmp_path))


def test_only_train_split():
    with pytest.raises(ValueError, match=r"split must be one of \['train'\]"):
        GLDv2CleanDataset(split='test')
