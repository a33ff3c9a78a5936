import os.path as osp

import cv2
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate
from mmengine.registry import DefaultScope
from torch.utils.data import DataLoader

from irtbox.datasets import GLDv2CleanDataset
from irtbox.datasets.samplers import GroupSizeSampler
from irtbox.datasets.transforms import GroupResize
from irtbox.registry import TRANSFORMS

SMALL_SIZES = ((32, 22), (32, 24), (28, 28), (24, 32), (22, 32))  # (w, h), wide to tall


def image(h, w):
    return np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize('hw, group', [((30, 60), 0), ((72, 100), 1), ((50, 50), 2),
                                       ((140, 100), 3), ((90, 50), 4)])
def test_resizes_to_the_group_size(hw, group):
    img = image(*hw)
    out = GroupResize()(dict(img=img, ori_shape=hw))
    w, h = ((512, 352), (512, 384), (448, 448), (384, 512), (352, 512))[group]
    assert out['size_group'] == group
    assert out['img'].shape == (h, w, 3) and out['img_shape'] == (h, w)
    np.testing.assert_array_equal(out['img'], cv2.resize(img, (w, h),
                                                          interpolation=cv2.INTER_LINEAR))


def test_group_comes_from_the_original_size():
    # the data list's width/height win over ori_shape, and the current image
    # (e.g. after a crop) does not change the group
    t = GroupResize(sizes=SMALL_SIZES)
    out = t(dict(img=image(40, 40), ori_shape=(40, 40), width=100, height=50))
    assert out['size_group'] == 0 and out['img'].shape[:2] == (22, 32)
    out = t(dict(img=image(40, 10), ori_shape=(100, 100)))  # a tall crop of a square image
    assert out['size_group'] == 2 and out['img'].shape[:2] == (28, 28)
    with pytest.raises(KeyError, match="'a.jpg'.*LoadImageFromFile"):
        t(dict(img=image(4, 4), img_path='a.jpg'))


def test_random_crop_keeps_the_group_size():
    t = GroupResize(sizes=SMALL_SIZES, crop_scale=(0.25, 0.5))
    np.random.seed(0)
    for _ in range(20):
        y, x, h, w = t._window(80, 120)
        assert 0 <= y <= 80 - h and 0 <= x <= 120 - w
        assert 0.25 - 0.03 <= h * w / (80 * 120) <= 0.5 + 0.03  # up to rounding
        assert abs(h / w - 80 / 120) < 0.03  # the image's aspect ratio
    out = t(dict(img=image(80, 120), ori_shape=(80, 120)))  # h / w 0.667: group 0
    assert out['img'].shape[:2] == (22, 32)
    whole = GroupResize(sizes=SMALL_SIZES, crop_scale=(1.0, 1.0))
    plain = GroupResize(sizes=SMALL_SIZES)
    img = image(80, 120)
    np.testing.assert_array_equal(whole(dict(img=img, ori_shape=(80, 120)))['img'],
                                  plain(dict(img=img, ori_shape=(80, 120)))['img'])


@pytest.mark.slow
def test_batches_come_out_at_one_size(data_dir):
    pipeline = [dict(type='LoadImageFromFile'),
                dict(type='GroupResize', sizes=SMALL_SIZES),
                dict(type='PackRetrievalInputs')]
    with DefaultScope.overwrite_default_scope('irtbox'):  # as a config's default_scope does
        dataset = GLDv2CleanDataset(data_root=osp.join(data_dir, 'gld', 'gldv2'),
                                    pipeline=pipeline)
    sampler = GroupSizeSampler(dataset, batch_size=2, seed=0)
    loader = DataLoader(dataset, batch_size=2, sampler=sampler, collate_fn=pseudo_collate)
    seen = set()
    for batch in loader:
        shapes = {tuple(x.shape) for x in batch['inputs']}
        assert len(shapes) == 1
        (_, h, w), = shapes
        group = sampler.groups[batch['data_samples'][0].sample_idx]
        assert (w, h) == SMALL_SIZES[group]
        seen.add(group)
        torch.stack(batch['inputs'])
    assert seen == {0, 1, 2, 3, 4}


def test_bad_arguments():
    assert isinstance(TRANSFORMS.build(dict(type='GroupResize')), GroupResize)
    with pytest.raises(ValueError, match='one positive'):
        GroupResize(aspect_bins=(1.0, ), sizes=SMALL_SIZES)
    with pytest.raises(ValueError, match=r'\(height, width\)\?'):
        GroupResize(sizes=SMALL_SIZES[::-1])
    with pytest.raises(ValueError, match='crop_scale'):
        GroupResize(crop_scale=(0.5, 0.2))
    with pytest.raises(ValueError, match='strictly increasing'):
        GroupResize(aspect_bins=('a', ))
