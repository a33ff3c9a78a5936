import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import BenchmarkSplitDataset, CSVDataset, FolderDataset
from irtbox.datasets.digits import prepare_digits


sklearn = pytest.importorskip('sklearn.datasets')


@pytest.fixture(scope='module')
def digits_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('digits'))
    counts = prepare_digits(out, size=8)
    return out, counts


@pytest.mark.slow
def test_folder_splits(digits_dir):
    out, counts = digits_dir
    target = sklearn.load_digits().target
    assert counts == {'train': int((target < 5).sum()), 'test': int((target >= 5).sum())}
    for split, digits in (('train', range(5)), ('test', range(5, 10))):
        labels = FolderDataset(data_root=out, split=split).get_gt_labels()
        assert len(labels) == counts[split] and len(np.unique(labels)) == len(digits)


@pytest.mark.slow
def test_benchmark_split_csv(digits_dir):
    out, _ = digits_dir
    target = sklearn.load_digits().target
    train = CSVDataset(data_root=out, ann_file='benchmark_split.csv', split='train')
    test = CSVDataset(data_root=out, ann_file='benchmark_split.csv', split='test')
    assert len(train) == int((target < 7).sum()) and len(test) == int((target >= 7).sum())
    for ds in (train, test):
        assert all(osp.isfile(ds.get_data_info(i)['img_path']) for i in range(0, len(ds), 97))
    # The digits configs' split: digits 0-4 train, 5-6 validate.
    inner = dict(type='CSVDataset', data_root=out, ann_file='benchmark_split.csv', split='train')
    parts = {part: BenchmarkSplitDataset(dataset=inner, part=part, val_fraction=0.3)
             for part in ('train', 'val')}
    assert len(parts['train']) == int((target < 5).sum())
    assert len(parts['val']) == int(((target >= 5) & (target < 7)).sum())
    assert len(np.unique(parts['train'].get_gt_labels())) == 5
    assert len(np.unique(parts['val'].get_gt_labels())) == 2
