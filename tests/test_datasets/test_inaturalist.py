import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import INaturalist2018Dataset


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_inat_parses_fixture(data_dir, split):
    root = osp.join(data_dir, 'inat2018')
    ds = INaturalist2018Dataset(data_root=root, split=split)
    lines = read_lines(osp.join(root, f'Inaturalist_{split}_set1.txt'))
    categories = [int(line.split('/')[2]) for line in lines]  # train_val2018/<super>/<id>/<img>
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == \
        [osp.join(root, line) for line in lines]
    _, labels = np.unique(categories, return_inverse=True)
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.metainfo['classes'] == tuple(sorted(set(categories)))
    assert all(osp.isfile(ds.get_data_info(i)['img_path']) for i in range(len(ds)))


@pytest.mark.slow
def test_inat_splits_are_class_disjoint(data_dir):
    root = osp.join(data_dir, 'inat2018')
    train, test = (INaturalist2018Dataset(data_root=root, split=s) for s in ('train', 'test'))
    assert not set(train.metainfo['classes']) & set(test.metainfo['classes'])


@pytest.mark.slow
def test_inat_numeric_ids_sort_numerically(tmp_path):
    (tmp_path / 'Inaturalist_train_set1.txt').write_text(
        'train_val2018/Aves/100/a.jpg\ntrain_val2018/Aves/20/b.jpg\ntrain_val2018/Aves/100/c.jpg\n')
    ds = INaturalist2018Dataset(data_root=str(tmp_path))
    assert ds.metainfo['classes'] == (20, 100)
    np.testing.assert_array_equal(ds.get_gt_labels(), [1, 0, 1])


def test_inat_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'INaturalist2018Dataset: ann_file .*'
                       r'Inaturalist_test_set1\.txt'):
        INaturalist2018Dataset(data_root=str(tmp_path), split='test')
    path = tmp_path / 'Inaturalist_train_set1.txt'
    path.write_text('train_val2018/Aves/1/a.jpg\nb.jpg\n')
    with pytest.raises(ValueError, match=r"Inaturalist_train_set1\.txt, line 2: expected one "
                       r"path '<\.\.\.>/<category>/<image>'"):
        INaturalist2018Dataset(data_root=str(tmp_path))
    path.write_text('train_val2018/Aves/1/a.jpg 1\n')
    with pytest.raises(ValueError, match=r'Inaturalist_train_set1\.txt, line 1: expected one'):
        INaturalist2018Dataset(data_root=str(tmp_path))
