"""eval_input_size reads the image size the test pipeline gives the model."""
import os.path as osp

import pytest
from mmengine.config import Config

from irtbox.utils.config import eval_input_size, load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


@pytest.mark.parametrize('config, size', [
    ('configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py', (32, 32)),       # Resize 32x32
    ('configs/irt/irt-r_deit-s_1xb64-35k_sop.py', (224, 224)),                 # 256 then crop 224
    ('configs/dtop/dtop_r50-vit-b_8xb8-30e_sfm120k.py', (512, 512)),           # keep_ratio 512
    ('configs/dml_benchmark/dml_dinov2-vit-b_arcface_1xb256-39k_cub.py', (224, 224)),  # wrapped
])
def test_shipped_configs(config, size):
    assert eval_input_size(load_config(osp.join(ROOT, config))) == size


def test_wh_order_and_errors():
    def cfg(*pipeline):
        return Config(dict(test_dataloader=dict(dataset=dict(pipeline=list(pipeline)))))
    assert eval_input_size(cfg(dict(type='Resize', scale=(64, 48)))) == (48, 64)
    assert eval_input_size(cfg(dict(type='Resize', scale=(64, 48)),
                               dict(type='CenterCrop', crop_size=(40, 30)))) == (30, 40)
    with pytest.raises(ValueError, match='no Resize or CenterCrop'):
        eval_input_size(cfg(dict(type='LoadImageFromFile')))
    with pytest.raises(ValueError, match=r'scale=\[1, 2, 3\]'):
        eval_input_size(cfg(dict(type='Resize', scale=[1, 2, 3])))
