"""Behaviour shared by all retrieval datasets (BaseRetrievalDataset)."""
import json
import os
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope

from irtbox.datasets import CUBDataset, InShopDataset, SOPDataset
from irtbox.registry import DATASETS
from irtbox.structures import DataSample


@pytest.mark.slow
def test_build_from_registry(data_dir):
    ds = DATASETS.build(dict(type='SOPDataset', data_root=osp.join(data_dir, 'sop'), split='test'))
    assert isinstance(ds, SOPDataset) and len(ds) == len(ds.get_gt_labels())


def test_lazy_init_reads_nothing_until_used(tmp_path):
    ds = SOPDataset(data_root=str(tmp_path), lazy_init=True)  # the file does not exist
    with pytest.raises(FileNotFoundError, match='Ebay_train.txt'):
        len(ds)


@pytest.mark.slow
@pytest.mark.parametrize('serialize_data', [True, False])
def test_indices_and_serialization(data_dir, serialize_data):
    root = osp.join(data_dir, 'cub')
    full = CUBDataset(data_root=root, split='test')
    sub = CUBDataset(data_root=root, split='test', indices=[1, 4, 5],
                     serialize_data=serialize_data)
    np.testing.assert_array_equal(sub.get_gt_labels(), full.get_gt_labels()[[1, 4, 5]])
    assert sub.get_data_info(2)['img_path'] == full.get_data_info(5)['img_path']
    assert sub.num_classes == full.num_classes  # the class list is that of the split


@pytest.mark.slow
def test_get_subset_updates_labels(data_dir):
    full = InShopDataset(data_root=osp.join(data_dir, 'inshop'), split='test')
    sub = full.get_subset([5, 0, 2])
    np.testing.assert_array_equal(sub.get_gt_labels(), full.get_gt_labels()[[5, 0, 2]])
    np.testing.assert_array_equal(sub.get_query_mask(), full.get_query_mask()[[5, 0, 2]])
    labels = full.get_gt_labels()
    full.get_subset_([3, 1])
    np.testing.assert_array_equal(full.get_gt_labels(), labels[[3, 1]])
    assert len(full) == 2


@pytest.mark.slow
def test_get_gt_labels_returns_a_copy(data_dir):
    ds = InShopDataset(data_root=osp.join(data_dir, 'inshop'), split='test')
    ds.get_gt_labels()[:] = -1
    ds.get_query_mask()[:] = False
    assert ds.get_gt_labels().min() == 0 and ds.get_query_mask().any()


@pytest.mark.slow
def test_pipeline_end_to_end(data_dir):
    pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=(20, 20)),
        dict(type='RandomCrop', crop_size=16),
        dict(type='RandomFlip', prob=0.5, direction='horizontal'),
        dict(type='PackRetrievalInputs'),
    ]
    with DefaultScope.overwrite_default_scope('irtbox'):  # as a config's default_scope does
        ds = InShopDataset(data_root=osp.join(data_dir, 'inshop'), split='test',
                           pipeline=pipeline, test_mode=True)
    out = ds[1]
    assert out['inputs'].shape == (3, 16, 16) and out['inputs'].dtype == torch.uint8
    sample = out['data_samples']
    assert isinstance(sample, DataSample)
    assert sample.gt_label.item() == ds.get_gt_labels()[1]
    assert sample.sample_idx == 1 and sample.is_query == bool(ds.get_query_mask()[1])
    assert sample.img_path == ds.get_data_info(1)['img_path']
    assert sample.ori_shape == (16, 16) and sample.img_shape == (16, 16)


def test_data_prefix_needs_img_path(data_dir):
    with pytest.raises(ValueError, match="data_prefix must be a dict with the key 'img_path'"):
        SOPDataset(data_root=osp.join(data_dir, 'sop'), data_prefix=dict(img='x'))


def _folder(root, classes):
    for name in classes:
        os.makedirs(osp.join(root, name), exist_ok=True)
        for k in range(2):
            open(osp.join(root, name, f'{k}.png'), 'wb').close()
    return str(root)


def test_exclude_classes_leaves_classes_out_from_a_list_or_a_json_file(tmp_path):
    """exclude_classes (the overlap check's exclude file, or a list): those classes' images are
    dropped before the labels are numbered, so the labels stay 0 .. num_classes - 1."""
    from irtbox.datasets import FolderDataset
    root = _folder(tmp_path / 'data', ['ant', 'bee', 'cat', 'dog'])
    listed = FolderDataset(data_root=root, exclude_classes=['bee', 'dog'])
    assert listed.metainfo['classes'] == ('ant', 'cat')
    assert listed.get_gt_labels().tolist() == [0, 0, 1, 1]
    path = tmp_path / 'exclude_classes.json'
    path.write_text(json.dumps(['cat']))
    from_file = FolderDataset(data_root=root, exclude_classes=str(path))
    assert from_file.metainfo['classes'] == ('ant', 'bee', 'dog') and len(from_file) == 6


@pytest.mark.parametrize('exclude, message', [
    (['bee', 'eel'], "exclude_classes: 1 class not in split None: ['eel']"),
    ([1], "exclude_classes: 1 class not in split None: [1]"),
    ('missing.json', 'exclude_classes: missing.json'),
    ({'a': 1}, 'exclude_classes: expected a list of class keys'),
])
def test_exclude_classes_refuses_what_it_cannot_apply(tmp_path, exclude, message):
    from irtbox.datasets import FolderDataset
    root = _folder(tmp_path / 'data', ['ant', 'bee'])
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        FolderDataset(data_root=root, exclude_classes=exclude)
    assert message in str(err.value)
