import numpy as np
import pytest

from irtbox.datasets.transforms import CropBBox, RandomCrop
from irtbox.registry import TRANSFORMS


def grid_image(height, width, channels=3):
    """Pixel (y, x, c) = 1000 y + 10 x + c: every window is identified by its content."""
    y, x, c = np.meshgrid(np.arange(height), np.arange(width), np.arange(channels), indexing='ij')
    return (1000 * y + 10 * x + c).astype(np.int64)


def test_random_crop_shape_and_content():
    img = grid_image(12, 10)
    corners = set()
    for seed in range(200):
        np.random.seed(seed)
        out = RandomCrop(crop_size=(8, 7))(dict(img=img.copy(), img_shape=(12, 10)))
        assert out['img'].shape == (8, 7, 3) and out['img_shape'] == (8, 7)
        y, x = out['img'][0, 0, 0] // 1000, (out['img'][0, 0, 0] % 1000) // 10
        np.testing.assert_array_equal(out['img'], img[y:y + 8, x:x + 7])
        corners.add((y, x))
    # every top-left corner of the valid range is reachable, and nothing else
    assert corners == {(y, x) for y in range(5) for x in range(4)}


def test_random_crop_grayscale_and_exact_size():
    img = grid_image(5, 5, 1)[..., 0]
    out = RandomCrop(5)(dict(img=img))
    np.testing.assert_array_equal(out['img'], img)


def test_random_crop_errors():
    with pytest.raises(ValueError, match='larger than the image'):
        RandomCrop(8)(dict(img=np.zeros((7, 20, 3)), img_path='a.jpg'))
    with pytest.raises(ValueError, match='crop_size must be a positive int'):
        RandomCrop((0, 4))
    with pytest.raises(ValueError, match='^RandomCrop: crop_size must be a positive integer, '
                       'got True$'):
        RandomCrop((4, True))


def test_crop_bbox_exact_pixels():
    img = grid_image(10, 12)
    # x1 = round(1.4) = 1, y1 = round(2.6) = 3, x2 = round(5.5) = 6, y2 = round(7.2) = 7
    out = CropBBox()(dict(img=img, bbox=[1.4, 2.6, 5.5, 7.2], ori_shape=(10, 12)))
    expected = np.array([[[1000 * y + 10 * x + c for c in range(3)] for x in range(1, 6)]
                         for y in range(3, 7)])
    np.testing.assert_array_equal(out['img'], expected)
    assert out['img_shape'] == (4, 5) and out['ori_shape'] == (10, 12)


def test_crop_bbox_rounds_half_to_even_and_clips():
    img = grid_image(10, 12)
    # round(0.5) = 0, round(4.5) = 4, round(2.5) = 2 (as PIL's Image.crop)
    out = CropBBox()(dict(img=img, bbox=np.array([0.5, 2.5, 4.5, 5.0])))
    np.testing.assert_array_equal(out['img'], img[2:5, 0:4])
    out = CropBBox()(dict(img=img, bbox=[-3, -2, 100, 9]))
    np.testing.assert_array_equal(out['img'], img[0:9, 0:12])


def test_crop_bbox_passthrough_and_errors():
    img = grid_image(6, 6)
    results = CropBBox()(dict(img=img))
    assert results['img'] is img
    assert CropBBox(bbox_key='box')(dict(img=img, box=None))['img'] is img
    for box in ([3, 1, 3, 5], [2, 4, 5, 4], [7, 0, 9, 5], [4, 1, 2, 5]):
        with pytest.raises(ValueError, match=r"CropBBox: box .* of 'q.jpg' is empty inside the "
                           r'6 x 6 \(w x h\) image'):
            CropBBox()(dict(img=img, bbox=box, img_path='q.jpg'))
    with pytest.raises(ValueError, match=r'must be 4 finite numbers \[x1, y1, x2, y2\]'):
        CropBBox()(dict(img=img, bbox=[1, 2, 3]))


def test_registered():
    assert isinstance(TRANSFORMS.build(dict(type='RandomCrop', crop_size=4)), RandomCrop)
    assert isinstance(TRANSFORMS.build(dict(type='CropBBox')), CropBBox)
    # mmcv's transforms are found through the parent registry
    assert TRANSFORMS.get('LoadImageFromFile') is not None
