"""The run a user runs, on 2 CPU processes: a backbone checkpoint, BatchNorm (DToP's ELM), a
whitening fit hook and a checkpoint mid-run. Each of three defects made it fail: the
checkpoint's weights were re-drawn by init_weights, the fit before the checkpoint deadlocked
(it ran collectives on rank 0 only) and the ranks' BatchNorm statistics drifted apart."""
import json
import os.path as osp
import subprocess

import pytest
import torch
from mmengine.config import Config

from tests.shared_runs import dist_train

from irtbox.registry import MODELS
from irtbox.utils.checkpoint import safe_torch_load, state_digest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_DTOP = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_dtop.py')



@pytest.mark.slow
def test_two_processes_start_from_the_checkpoint_save_mid_run_and_agree(tmp_path):
    import timm
    cfg = Config.fromfile(TINY_DTOP)
    backbone = cfg.model.backbone
    kwargs = {k: backbone[k] for k in ('img_size', 'patch_size', 'depth', 'embed_dim',
                                       'num_heads')}
    torch.manual_seed(3)
    ckpt = str(tmp_path / 'backbone.pth')
    torch.save(timm.create_model(backbone.model_name, num_classes=0, **kwargs).state_dict(), ckpt)
    backbone.checkpoint = ckpt
    expected = state_digest(MODELS.build(backbone).state_dict())
    cfg.train_cfg.max_iters = 4
    cfg.default_hooks.checkpoint.interval = 2
    probe = str(tmp_path / 'probe')
    cfg.custom_hooks = list(cfg.custom_hooks) + [dict(type='RehearsalProbeHook', out_dir=probe)]
    cfg.custom_imports = dict(imports=['irtbox.ops.rehearsal_probe'])  # registers the probe
    config = str(tmp_path / 'config.py')
    cfg.dump(config)
    work_dir = str(tmp_path / 'run')
    proc = dist_train(config, work_dir, env=dict(IRTBOX_REHEARSAL_PHASE='train'),
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Before the fix the run hung at "Saving checkpoint at 2 iterations".
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out[-5000:]
    ranks = []
    for rank in range(2):
        with open(osp.join(probe, f'train_rank{rank}.json')) as f:
            ranks.append(json.load(f))
    for record in ranks:
        assert record['start']['backbone'] == expected  # the checkpoint, not timm's re-init
        assert record['end']['backbone'] != expected
    # BatchNorm statistics (the ELM's) and every other weight and buffer agree.
    assert ranks[0]['end']['model'] == ranks[1]['end']['model']
    saved = safe_torch_load(osp.join(work_dir, 'iter_2.pth'))['state_dict']
    assert state_digest(saved) == ranks[0]['saved'][0]['model']
    assert bool(saved['whitening.fitted'])
