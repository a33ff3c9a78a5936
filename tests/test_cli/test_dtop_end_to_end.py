"""A small DToP end to end on CPU: 2 training iterations, then the revisited test."""
import os.path as osp

import pytest

from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool
from irtbox.utils.checkpoint import safe_torch_load

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_dtop.py')


@pytest.mark.slow
def test_two_iterations_then_test(tmp_path, in_root):
    work_dir = str(tmp_path)
    train_tool.main([CONFIG, '--work-dir', work_dir])
    ckpt = osp.join(work_dir, 'iter_2.pth')
    state = safe_torch_load(ckpt)['state_dict']
    assert state['head.losses.arcface.class_weights'].shape == (8, 64)
    assert bool(state['whitening.fitted'])
    metrics = test_tool.main([CONFIG, ckpt, '--work-dir', work_dir])
    for name in ('mAP_M', 'mAP_H', 'no_whitening/mAP_M', 'no_whitening/mAP_H'):
        assert 0.0 <= metrics[f'roxford5k/{name}'] <= 100.0
