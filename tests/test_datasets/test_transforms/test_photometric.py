import numpy as np
import pytest

from irtbox.datasets.transforms import RandomIllumination


def test_formula_with_fixed_draws(monkeypatch):
    img = np.array([[[10, 20, 30], [200, 210, 220]]], dtype=np.uint8)
    draws = iter([0.0, 1.2, 0.1])  # rand() < prob, contrast c, brightness b (x 255)
    monkeypatch.setattr(np.random, 'rand', lambda: next(draws))
    monkeypatch.setattr(np.random, 'uniform', lambda lo, hi: next(draws))
    out = RandomIllumination(brightness=0.2, contrast=0.3, prob=1.0).transform(dict(img=img))['img']
    x = img.astype(np.float32)
    expected = np.clip(1.2 * (x - x.mean()) + x.mean() + 25.5, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.uint8


def test_prob_zero_is_identity_and_bad_args():
    img = np.random.randint(0, 255, (4, 4, 3), dtype=np.uint8)
    out = RandomIllumination(prob=0.0).transform(dict(img=img.copy()))['img']
    np.testing.assert_array_equal(out, img)
    with pytest.raises(ValueError, match='contrast'):
        RandomIllumination(contrast=1.5)


def test_rand_augment_matches_torchvision_on_rgb():
    import torch
    from torchvision.transforms import RandAugment as TorchRandAugment

    from irtbox.datasets.transforms import RandAugment
    img = np.random.RandomState(0).randint(0, 255, (16, 12, 3), dtype=np.uint8)  # BGR
    torch.manual_seed(3)
    out = RandAugment(num_ops=3, magnitude=9).transform(dict(img=img.copy()))['img']
    torch.manual_seed(3)
    rgb = torch.from_numpy(img[..., ::-1].copy()).permute(2, 0, 1)
    expected = TorchRandAugment(num_ops=3, magnitude=9)(rgb).permute(1, 2, 0).numpy()[..., ::-1]
    np.testing.assert_array_equal(out, expected)
    assert out.shape == img.shape and out.dtype == np.uint8
    with pytest.raises(ValueError, match='magnitude'):
        RandAugment(magnitude=40)
    with pytest.raises(ValueError, match='H x W x 3 uint8'):
        RandAugment().transform(dict(img=img[..., 0]))
