"""Particular objects end to end: tuple training with mining on the SfM-120k fixture, then
ROxford5k (+distractors) with multi-scale descriptors and learned whitening."""
import os.path as osp

import numpy as np
import pytest

from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool
from irtbox.utils.checkpoint import safe_torch_load

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_landmarks.py')


@pytest.mark.slow
def test_train_one_epoch_then_test(tmp_path, in_root):
    work_dir = str(tmp_path)
    train_tool.main([CONFIG, '--work-dir', work_dir])
    ckpt = osp.join(work_dir, 'epoch_1.pth')
    state = safe_torch_load(ckpt)['state_dict']
    assert bool(state['whitening.fitted'])  # learned before the checkpoint was written
    out = str(tmp_path / 'r.npz')
    metrics = test_tool.main([CONFIG, ckpt, '--work-dir', work_dir, '--out', out])
    for tag in ('roxford5k/', 'roxford5k/no_whitening/'):
        for name in ('mAP_E', 'mAP_M', 'mAP_H', 'mP@1_M', 'mP@10_H'):
            assert 0.0 <= metrics[tag + name] <= 100.0
    saved = np.load(out)
    # The fixture: 3 queries, a database of 3 x 4 views + 4 unrelated images, 4 R1M distractors.
    assert saved['is_query'].sum() == 3 and len(saved['sample_idx']) == 3 + 16 + 4
    # Both metrics' arrays are kept: whitened first, the raw ones under their tag.
    assert saved['embeddings'].shape == saved['no_whitening/embeddings'].shape
    assert not np.allclose(saved['embeddings'], saved['no_whitening/embeddings'])
