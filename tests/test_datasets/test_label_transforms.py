"""The recipe benchmark's data-side factors: validation split, class
fraction, label noise (pure functions and the BenchmarkSplitDataset wrapper)."""
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope

from irtbox.datasets import (BenchmarkSplitDataset, CSVDataset, Cars196Dataset, add_label_noise,
                             keep_class_fraction, split_classes)
from irtbox.datasets.samplers import MPerClassSampler
from irtbox.registry import DATASETS


# ------------------------------------------------------------------ split_classes
@pytest.mark.parametrize('num_classes,val_fraction,num_val', [(98, 0.2, 20), (100, 0.2, 20),
                                                              (5, 0.2, 1), (10, 0.5, 5)])
def test_split_sorted_takes_last_classes(num_classes, val_fraction, num_val):
    train, val = split_classes(num_classes, val_fraction)
    np.testing.assert_array_equal(train, np.arange(num_classes - num_val))
    np.testing.assert_array_equal(val, np.arange(num_classes - num_val, num_classes))


def test_split_random_is_seeded_and_disjoint():
    train, val = split_classes(50, 0.2, order='random', seed=3)
    assert len(val) == 10 and not set(train) & set(val)
    assert sorted(set(train) | set(val)) == list(range(50))
    again = split_classes(50, 0.2, order='random', seed=3)
    np.testing.assert_array_equal(val, again[1])
    assert any(not np.array_equal(val, split_classes(50, 0.2, 'random', s)[1]) for s in (4, 5))
    assert not np.array_equal(val, np.arange(40, 50))


def test_split_errors():
    with pytest.raises(ValueError, match='gives 0 validation classes'):
        split_classes(2, 0.2)
    with pytest.raises(ValueError, match=r'val_fraction must be in \[0, 1\)'):
        split_classes(10, 1.0)
    with pytest.raises(ValueError, match="order must be 'sorted' or 'random'"):
        split_classes(10, 0.2, order='shuffled')
    train, val = split_classes(7, 0.0)
    assert len(train) == 7 and len(val) == 0


# ------------------------------------------------------------ keep_class_fraction
@pytest.mark.parametrize('fraction', [0.1, 0.25, 0.5, 0.77, 1.0])
def test_keep_class_fraction_exact_count(fraction):
    classes = np.arange(10, 90)  # 80 classes
    kept = keep_class_fraction(classes, fraction, seed=1)
    assert len(kept) == round(fraction * 80) == len(set(kept))
    assert set(kept) <= set(classes) and list(kept) == sorted(kept)
    np.testing.assert_array_equal(kept, keep_class_fraction(classes, fraction, seed=1))


def test_keep_class_fraction_seed_and_errors():
    classes = np.arange(40)
    draws = {tuple(keep_class_fraction(classes, 0.5, seed=s)) for s in range(4)}
    assert len(draws) > 1
    with pytest.raises(ValueError, match='keeps none'):
        keep_class_fraction(classes, 0.01)
    with pytest.raises(ValueError, match=r'class_fraction must be in \[0, 1\]'):
        keep_class_fraction(classes, 1.5)


# ---------------------------------------------------------------- add_label_noise
@pytest.mark.parametrize('fraction', [0.0, 0.01, 0.08, 0.32, 0.5, 1.0])
def test_label_noise_exact_fraction(fraction):
    labels = np.repeat(np.arange(0, 40, 2), 7)[::-1].copy()  # 140 labels, classes 0, 2, .., 38
    noisy, changed = add_label_noise(labels, fraction, seed=7)
    count = round(fraction * len(labels))
    assert len(changed) == count == int((noisy != labels).sum())
    assert set(np.flatnonzero(noisy != labels)) == set(changed)
    assert set(noisy) <= set(labels)
    noisy2, changed2 = add_label_noise(labels, fraction, seed=7)
    np.testing.assert_array_equal(noisy, noisy2)
    np.testing.assert_array_equal(changed, changed2)


def test_label_noise_seed_classes_and_uniformity():
    labels = np.zeros(3000, dtype=np.int64)
    noisy, changed = add_label_noise(labels, 1.0, classes=[0, 1, 2, 3], seed=0)
    assert len(changed) == 3000 and (noisy != 0).all()
    counts = np.bincount(noisy, minlength=4)[1:]
    # uniform over the 3 other classes: 1000 each, binomial sd ~ 26
    assert np.all(np.abs(counts - 1000) < 130)
    a = add_label_noise(np.arange(100) % 5, 0.3, seed=1)[0]
    b = add_label_noise(np.arange(100) % 5, 0.3, seed=2)[0]
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError, match='at least 2 classes'):
        add_label_noise(np.zeros(10), 0.5)
    with pytest.raises(ValueError, match='every label must be one of classes'):
        add_label_noise([0, 1, 5], 0.5, classes=[0, 1])
    with pytest.raises(ValueError, match=r'label_noise must be in \[0, 1\]'):
        add_label_noise([0, 1], -0.1)


# --------------------------------------------------------- BenchmarkSplitDataset
NUM_CLASSES, PER_CLASS = 30, 4


@pytest.fixture
def csv_cfg(tmp_path):
    """A CSVDataset of 30 classes (integer ids 1..30, 4 images each); the images need not
    exist."""
    rows = ['path,label'] + [f'img/{c}_{k}.jpg,{c}' for k in range(PER_CLASS)
                             for c in range(1, NUM_CLASSES + 1)]
    (tmp_path / 'ann.csv').write_text('\n'.join(rows) + '\n')
    # serialize_data=False: serialising calls gc.collect(), slow in a test
    return dict(type='CSVDataset', data_root=str(tmp_path), ann_file='ann.csv',
                label_type='int', serialize_data=False)


def class_of_path(ds):
    """The original class id of every sample, read from its path."""
    return np.array([int(osp.basename(ds.get_data_info(i)['img_path']).split('_')[0])
                     for i in range(len(ds))])


@pytest.mark.slow
def test_benchmark_split_val_is_untouched(csv_cfg):
    val = BenchmarkSplitDataset(dataset=csv_cfg, part='val')
    assert val.metainfo['classes'] == tuple(range(25, 31))  # the last 20% of the sorted ids
    np.testing.assert_array_equal(val.get_gt_labels(), class_of_path(val) - 25)
    for kw in (dict(label_noise=0.5), dict(class_fraction=0.3), dict(seed=9)):
        other = BenchmarkSplitDataset(dataset=csv_cfg, part='val', **kw)
        assert [other.get_data_info(i) for i in range(len(other))] == \
            [val.get_data_info(i) for i in range(len(val))]


@pytest.mark.slow
def test_benchmark_split_keeps_the_inner_class_order(csv_cfg):
    # String labels '1'..'30' (CSVDataset's default): the wrapper keeps the wrapped dataset's
    # numeric order instead of sorting them again as strings ('1', '10', '11', ...).
    cfg = dict(csv_cfg, label_type='str')
    val = BenchmarkSplitDataset(dataset=cfg, part='val')
    assert val.metainfo['classes'] == tuple(str(c) for c in range(25, 31))
    np.testing.assert_array_equal(val.get_gt_labels(), class_of_path(val) - 25)
    train = BenchmarkSplitDataset(dataset=cfg)
    assert train.metainfo['classes'] == tuple(str(c) for c in range(1, 25))
    np.testing.assert_array_equal(train.get_gt_labels(), class_of_path(train) - 1)


@pytest.mark.slow
def test_benchmark_split_train_clean(csv_cfg):
    train = BenchmarkSplitDataset(dataset=csv_cfg)
    val = BenchmarkSplitDataset(dataset=csv_cfg, part='val')
    assert train.metainfo['classes'] == tuple(range(1, 25))
    assert not set(train.metainfo['classes']) & set(val.metainfo['classes'])
    assert len(train) + len(val) == NUM_CLASSES * PER_CLASS
    np.testing.assert_array_equal(train.get_gt_labels(), class_of_path(train) - 1)
    assert train.get_data_info(3)['sample_idx'] == 3
    whole = BenchmarkSplitDataset(dataset=csv_cfg, val_fraction=0.0)
    assert len(whole) == NUM_CLASSES * PER_CLASS
    with pytest.raises(ValueError, match="part='val' needs val_fraction > 0"):
        BenchmarkSplitDataset(dataset=csv_cfg, part='val', val_fraction=0.0)


@pytest.mark.slow
def test_benchmark_split_random_order(csv_cfg):
    train = BenchmarkSplitDataset(dataset=csv_cfg, split_order='random', seed=2)
    val = BenchmarkSplitDataset(dataset=csv_cfg, part='val', split_order='random', seed=2)
    assert len(val.metainfo['classes']) == 6 and len(train.metainfo['classes']) == 24
    assert set(train.metainfo['classes']) | set(val.metainfo['classes']) == set(range(1, 31))
    assert not set(train.metainfo['classes']) & set(val.metainfo['classes'])


@pytest.mark.slow
@pytest.mark.parametrize('class_fraction', [0.25, 0.5, 1.0])
def test_benchmark_split_class_fraction(csv_cfg, class_fraction):
    train = BenchmarkSplitDataset(dataset=csv_cfg, class_fraction=class_fraction, seed=4)
    kept = train.metainfo['classes']
    assert len(kept) == round(class_fraction * 24) and set(kept) <= set(range(1, 25))
    assert len(train) == len(kept) * PER_CLASS
    assert set(class_of_path(train)) == set(kept)
    np.testing.assert_array_equal(train.get_gt_labels(),
                                  np.searchsorted(np.array(kept), class_of_path(train)))
    again = BenchmarkSplitDataset(dataset=csv_cfg, class_fraction=class_fraction, seed=4)
    assert again.metainfo['classes'] == kept
    # the noise draw does not move the kept classes
    noisy = BenchmarkSplitDataset(dataset=csv_cfg, class_fraction=class_fraction, seed=4,
                                  label_noise=0.3)
    assert set(class_of_path(noisy)) == set(kept)


@pytest.mark.slow
@pytest.mark.parametrize('label_noise', [0.1, 0.32, 0.5])
def test_benchmark_split_label_noise(csv_cfg, label_noise):
    train = BenchmarkSplitDataset(dataset=csv_cfg, label_noise=label_noise, class_fraction=0.5,
                                  seed=1)
    kept = np.array(train.metainfo['classes'])
    noisy_ids = kept[train.get_gt_labels()]
    clean_ids = class_of_path(train)
    assert int((noisy_ids != clean_ids).sum()) == round(label_noise * len(train))
    assert set(noisy_ids) <= set(kept)  # replaced by another kept training class
    labels = train.get_gt_labels()
    assert labels.min() == 0 and labels.max() == len(kept) - 1
    # the samples' labels, as the pipeline and the samplers see them, are the noisy ones
    assert [train.get_data_info(i)['gt_label'] for i in range(len(train))] == labels.tolist()
    same = BenchmarkSplitDataset(dataset=csv_cfg, label_noise=label_noise, class_fraction=0.5,
                                 seed=1)
    np.testing.assert_array_equal(same.get_gt_labels(), labels)
    other = BenchmarkSplitDataset(dataset=csv_cfg, label_noise=label_noise, class_fraction=0.5,
                                  seed=2)
    assert not np.array_equal(other.get_gt_labels(), labels)
    # samplers group by the noisy labels
    batches = np.array(list(MPerClassSampler(train, batch_size=8, m=2, seed=0))).reshape(-1, 8)
    for batch in batches:
        _, counts = np.unique(labels[batch], return_counts=True)
        assert counts.tolist() == [2, 2, 2, 2]


@pytest.mark.slow
def test_benchmark_split_pipeline_packs_noisy_label(data_dir):
    pipeline = [dict(type='LoadImageFromFile'), dict(type='PackRetrievalInputs')]
    with DefaultScope.overwrite_default_scope('irtbox'):
        ds = DATASETS.build(dict(
            type='BenchmarkSplitDataset', label_noise=1.0, seed=0, pipeline=pipeline,
            dataset=dict(type='Cars196Dataset', data_root=osp.join(data_dir, 'cars196'))))
    inner = Cars196Dataset(data_root=osp.join(data_dir, 'cars196'))
    assert ds.metainfo['classes'] == (1, 2, 3, 4)
    labels = ds.get_gt_labels()
    clean = {inner.get_data_info(i)['img_path']: inner.get_gt_labels()[i]
             for i in range(len(inner))}
    for i in range(len(ds)):
        out = ds[i]
        assert out['data_samples'].gt_label.item() == labels[i]
        assert labels[i] != clean[out['data_samples'].img_path]  # every label was replaced
        assert isinstance(out['inputs'], torch.Tensor)


@pytest.mark.slow
def test_benchmark_split_errors(csv_cfg):
    with pytest.raises(ValueError, match=r"split must be one of \['train', 'val'\]"):
        BenchmarkSplitDataset(dataset=csv_cfg, part='test')
    with pytest.raises(ValueError, match="use 'part'"):
        BenchmarkSplitDataset(dataset=csv_cfg, split='train')
    with pytest.raises(ValueError, match=r'label_noise must be in \[0, 1\]'):
        BenchmarkSplitDataset(dataset=csv_cfg, label_noise=2.0)
    with pytest.raises(ValueError, match='keeps none'):
        BenchmarkSplitDataset(dataset=csv_cfg, class_fraction=0.01)
    assert isinstance(BenchmarkSplitDataset(dataset=DATASETS.build(csv_cfg)).dataset, CSVDataset)
