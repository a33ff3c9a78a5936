"""Photometric augmentation: illumination, RandAugment."""
import numpy as np
from mmcv.transforms import BaseTransform

from irtbox.registry import TRANSFORMS

__all__ = ['RandomIllumination', 'RandAugment']


@TRANSFORMS.register_module()
class RandomIllumination(BaseTransform):
    """Random brightness and contrast: ``x' = clip(c · (x − mean) + mean + b·255)``.

    ``c`` is drawn uniformly from ``[1 − contrast, 1 + contrast]`` and ``b`` from ``[−brightness,
    brightness]`` (``mean``: the image's mean intensity), with probability ``prob``; the image keeps
    its dtype (uint8). DToP's "illumination augmentation" (the supplementary gives no parameters;
    these are our defaults).

    Required keys: ``img``. Modified keys: ``img``.
    """

    def __init__(self, brightness: float = 0.2, contrast: float = 0.2, prob: float = 0.5):
        if brightness < 0 or not 0 <= contrast < 1 or not 0 <= prob <= 1:
            raise ValueError('RandomIllumination: need brightness >= 0, 0 <= contrast < 1 and '
                             f'0 <= prob <= 1, got {brightness}, {contrast}, {prob}')
        self.brightness, self.contrast, self.prob = brightness, contrast, prob

    def transform(self, results: dict) -> dict:
        if np.random.rand() >= self.prob:
            return results
        img = results['img'].astype(np.float32)
        c = np.random.uniform(1 - self.contrast, 1 + self.contrast)
        b = np.random.uniform(-self.brightness, self.brightness) * 255.0
        mean = img.mean()
        results['img'] = np.clip(c * (img - mean) + mean + b, 0, 255).astype(results['img'].dtype)
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(brightness={self.brightness}, contrast={self.contrast}, '
                f'prob={self.prob})')


@TRANSFORMS.register_module()
class RandAugment(BaseTransform):
    """RandAugment (Cubuk et al. 2020): ``num_ops`` random operations of strength ``magnitude``.

    Applies torchvision's ``RandAugment`` to the image (HWC BGR uint8 in and out; the operations run
    on the RGB tensor). The training-recipe benchmark uses 3 operations at magnitude 9.

    Required keys: ``img``. Modified keys: ``img``.
    """

    def __init__(self, num_ops: int = 3, magnitude: int = 9, num_magnitude_bins: int = 31):
        from torchvision.transforms import RandAugment as TorchRandAugment
        if not 0 <= magnitude < num_magnitude_bins:
            raise ValueError(f'RandAugment: magnitude must be in [0, {num_magnitude_bins}), '
                             f'got {magnitude}')
        self.num_ops, self.magnitude = num_ops, magnitude
        self._op = TorchRandAugment(num_ops=num_ops, magnitude=magnitude,
                                    num_magnitude_bins=num_magnitude_bins)

    def transform(self, results: dict) -> dict:
        import torch
        img = results['img']
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            raise ValueError('RandAugment expects an H x W x 3 uint8 image, got '
                             f'{img.dtype} {img.shape} ({results.get("img_path")})')
        rgb = torch.from_numpy(np.ascontiguousarray(img[..., ::-1])).permute(2, 0, 1)
        out = self._op(rgb).permute(1, 2, 0).numpy()[..., ::-1]
        results['img'] = np.ascontiguousarray(out)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(num_ops={self.num_ops}, magnitude={self.magnitude})'
