"""ImageSearcher over a model whose test pipeline gives no fixed size (a short-edge resize, a
scale factor): built, filled and searched like any other."""
import os.path as osp

import cv2
import numpy as np
import pytest
import torch

from irtbox.apis import init_model
from irtbox.search import ImageSearcher
from irtbox.utils.config import load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


@pytest.mark.slow
@pytest.mark.parametrize('resize', [
    dict(type='Resize', scale=(1000, 24), keep_ratio=True),  # the short edge to 24
    dict(type='Resize', scale_factor=0.5),
])
def test_search_with_a_pipeline_of_no_fixed_size(resize, tmp_path):
    cfg = load_config(TINY)
    cfg.test_dataloader.dataset.pipeline[1] = resize
    cfg.model.backbone.update(dynamic_img_size=True, dynamic_img_pad=True)
    torch.manual_seed(0)
    model = init_model(cfg)
    searcher = ImageSearcher(model)  # the identity measures the dimension at the spec's size
    assert searcher.dim == 32
    rng = np.random.default_rng(0)
    paths = []
    for i, shape in enumerate([(40, 24), (32, 32), (24, 40), (30, 60), (48, 48)]):
        paths.append(str(tmp_path / f'{i}.png'))
        cv2.imwrite(paths[-1], rng.integers(0, 256, (*shape, 3), dtype=np.uint8))
    assert searcher.add(paths, progress=False) == 5
    for path in paths:
        [best] = searcher.search(path, k=1)
        assert best.id == path and best.score > 0.9999
    [best] = searcher.search(cv2.imread(paths[3])[..., ::-1], k=1)  # an RGB array
    assert best.id == paths[3] and best.score > 0.9999
