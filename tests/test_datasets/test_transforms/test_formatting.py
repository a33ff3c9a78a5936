import numpy as np
import pytest
import torch

from irtbox.datasets.transforms import PackRetrievalInputs
from irtbox.structures import DataSample


def test_pack_colour_image():
    img = np.random.default_rng(0).integers(0, 256, size=(5, 7, 3)).astype(np.uint8)
    results = dict(img=img, gt_label=3, sample_idx=4, img_path='a/b.jpg', ori_shape=(9, 9),
                   img_shape=(5, 7), is_query=True, bbox=[0, 0, 1, 1])
    out = PackRetrievalInputs()(results)
    inputs, sample = out['inputs'], out['data_samples']
    assert isinstance(inputs, torch.Tensor) and inputs.dtype == torch.uint8
    assert inputs.shape == (3, 5, 7) and inputs.is_contiguous()
    for c in range(3):  # channel order kept (BGR stays BGR)
        np.testing.assert_array_equal(inputs[c].numpy(), img[:, :, c])
    assert isinstance(sample, DataSample)
    assert sample.gt_label.dtype == torch.long and sample.gt_label.shape == () \
        and sample.gt_label.item() == 3
    assert sample.metainfo == dict(sample_idx=4, img_path='a/b.jpg', ori_shape=(9, 9),
                                   img_shape=(5, 7), is_query=True)  # bbox not a meta key


def test_pack_grayscale_float_no_label():
    img = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = PackRetrievalInputs(meta_keys=('img_path', 'bbox'))(dict(img=img, img_path='g.png'))
    assert out['inputs'].shape == (1, 3, 4) and out['inputs'].dtype == torch.float32
    np.testing.assert_array_equal(out['inputs'][0].numpy(), img)
    sample = out['data_samples']
    assert 'gt_label' not in sample
    assert sample.metainfo == dict(img_path='g.png')


def test_pack_requires_image():
    with pytest.raises(KeyError, match=r'x\.jpg.*load the image first'):
        PackRetrievalInputs()(dict(img_path='x.jpg'))
