"""Partial FC in a real training: 2 CPU processes (gloo, the ranks of tools/dist_train.sh) against 1
process, from the same weights (the backbone from a checkpoint; the centres drawn from the
layer's seed, the same matrix at any world size); then the 2-process checkpoint tested and
resumed at 1 process. (That the 1-process layer at sample_rate=1.0 is the replicated ArcFace
loss, to 1e-12, is test_partial_fc.py's.)"""
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from tests.shared_runs import forked_ranks

from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool
from irtbox.models.losses import ArcFaceLoss
from irtbox.utils.checkpoint import safe_torch_load

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
STEPS = 8  # over two passes of the 14 training images (the sampler wraps at step 4)
KEY = 'head.losses.arcface.class_weights'


def write_config(tmp_path, name, backbone, batch_size):
    """The tiny IRT run with ArcFace on the 5 SOP fixture classes; batches in dataset order
    (InfiniteSampler without shuffling), so that 1 process with batches of 4 and 2 processes
    with batches of 2 see the same 4 images at every step (rank r: images r, r + 2, ...)."""
    cfg = Config.fromfile(TINY_CONFIG)
    cfg.model.backbone.checkpoint = backbone
    arcface = dict(type='ArcFaceLoss', num_classes=5, embed_dim=32, margin=0.3, scale=16.0,
                   partial_fc=dict(sample_rate=1.0, seed=0))
    cfg.model.head = dict(type='EmbeddingHead', losses=dict(arcface=arcface))
    cfg.train_dataloader.batch_size = batch_size
    cfg.train_dataloader.sampler = dict(type='InfiniteSampler', shuffle=False)
    cfg.optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.05, momentum=0.9,
                                            weight_decay=1e-4))
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=STEPS, val_interval=1000)
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', by_epoch=False, interval=STEPS)
    path = str(tmp_path / f'{name}.py')
    cfg.dump(path)
    return path


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path, in_root):
    import timm
    cfg = Config.fromfile(TINY_CONFIG).model.backbone
    kwargs = {k: cfg[k] for k in ('img_size', 'patch_size', 'depth', 'embed_dim', 'num_heads')}
    torch.manual_seed(0)
    backbone = str(tmp_path / 'backbone.pth')
    torch.save(timm.create_model(cfg.model_name, num_classes=0, **kwargs).state_dict(), backbone)
    single = write_config(tmp_path, 'single', backbone, 4)
    sharded = write_config(tmp_path, 'sharded', backbone, 2)

    one = str(tmp_path / 'one')
    train_tool.main([single, '--work-dir', one])
    two = str(tmp_path / 'two')
    # The ranks of tools/dist_train.sh, forked from a fork server (the launcher is not tested).
    forked_ranks('train', sharded, '--work-dir', two, timeout=300)

    expected = safe_torch_load(osp.join(one, f'iter_{STEPS}.pth'))
    ckpt = osp.join(two, f'iter_{STEPS}.pth')
    got = safe_torch_load(ckpt)
    assert set(got['state_dict']) == set(expected['state_dict'])
    assert got['state_dict'][KEY].shape == (5, 32)  # the whole matrix, gathered
    for key, value in expected['state_dict'].items():
        torch.testing.assert_close(got['state_dict'][key], value, rtol=1e-4, atol=1e-5,
                                   msg=key)
    # the weights moved, and the centres' momentum is whole too
    start = ArcFaceLoss(5, 32, partial_fc=dict(sample_rate=1.0, seed=0)).class_weights
    assert not torch.allclose(got['state_dict'][KEY], start)
    momentum = [s['momentum_buffer'] for s in got['optimizer']['state'].values()
                if s['momentum_buffer'].shape == (5, 32)]
    expected_momentum = [s['momentum_buffer'] for s in expected['optimizer']['state'].values()
                         if s['momentum_buffer'].shape == (5, 32)]
    assert len(momentum) == len(expected_momentum) == 1
    torch.testing.assert_close(momentum[0], expected_momentum[0], rtol=1e-4, atol=1e-5)

    # the checkpoint needs no training layout: tested and resumed at 1 process
    metrics = test_tool.main([sharded, ckpt, '--work-dir', str(tmp_path / 'test')])
    assert 'recall@1' in metrics
    resumed = str(tmp_path / 'resumed')
    os.makedirs(resumed)
    train_tool.main([sharded, '--work-dir', resumed, '--resume', ckpt,
                     '--cfg-options', f'train_cfg.max_iters={STEPS + 2}'])
    after = safe_torch_load(osp.join(resumed, f'iter_{STEPS + 2}.pth'))
    assert after['meta']['iter'] == STEPS + 2
    assert after['state_dict'][KEY].shape == (5, 32)
