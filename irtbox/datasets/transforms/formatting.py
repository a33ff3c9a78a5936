"""Packing a transformed sample into the model's input format."""
from typing import Sequence

import numpy as np
import torch
from mmcv.transforms import BaseTransform

from irtbox.registry import TRANSFORMS
from irtbox.structures import DataSample

__all__ = ['PackRetrievalInputs']


@TRANSFORMS.register_module()
class PackRetrievalInputs(BaseTransform):
    """Pack ``results`` into ``{'inputs': Tensor, 'data_samples': DataSample}``.

    - ``inputs``: ``results['img']`` (H x W x C, as decoded) as a contiguous C x H x W tensor
      of the same dtype; channel order and scaling are left to the data preprocessor. A 2-D
      image becomes 1 x H x W.
    - ``data_samples``: a :class:`DataSample` with ``gt_label`` when ``results`` has one, and each
      key of ``meta_keys`` found in ``results`` as a meta field (missing keys are skipped).

    Args:
        meta_keys (Sequence[str]): Keys copied to the data sample's metainfo.
    """

    def __init__(self,
                 meta_keys: Sequence[str] = ('sample_idx', 'img_path', 'ori_shape',
                                             'img_shape', 'is_query')):
        self.meta_keys = tuple(meta_keys)

    def transform(self, results: dict) -> dict:
        if 'img' not in results:
            raise KeyError(f'PackRetrievalInputs: no "img" in the results of '
                           f'{results.get("img_path")!r}; load the image first')
        img = np.asarray(results['img'])
        if img.ndim == 2:
            img = img[..., None]
        if img.ndim != 3:
            raise ValueError(f'PackRetrievalInputs: expected an H x W [x C] image, got '
                             f'shape {img.shape} for {results.get("img_path")!r}')
        inputs = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))

        data_sample = DataSample()
        if results.get('gt_label') is not None:
            data_sample.set_gt_label(results['gt_label'])
        data_sample.set_metainfo({k: results[k] for k in self.meta_keys if k in results})
        return dict(inputs=inputs, data_samples=data_sample)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(meta_keys={self.meta_keys})'
