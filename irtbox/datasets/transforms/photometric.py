"""Illumination augmentation."""
import numpy as np
from mmcv.transforms import BaseTransform

from irtbox.registry import TRANSFORMS


@TRANSFORMS.register_module()
class RandomIllumination(BaseTransform):
    """Random brightness and contrast: ``x' = clip(c · (x − mean) + mean + b·255)``.

    ``c`` is drawn uniformly from ``[1 − contrast, 1 + contrast]`` and ``b`` from
    ``[−brightness, brightness]`` (``mean``: the image's mean intensity), with
    probability ``prob``; the image keeps its dtype (uint8). DToP's
    "illumination augmentation" (the supplementary gives no parameters; these
    are our defaults).

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
