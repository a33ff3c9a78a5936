"""The GPU paths on a real GPU (skipped without one; ``tools/misc/gpu_check.sh`` runs them
where a GPU is lent). Their CPU simulations, which CI runs, are beside each path's other
tests (``tests/gpu_semantics.py``)."""
import os

import pytest
import torch
from mmengine.config import Config

from irtbox.engine import IrtboxRunner
from irtbox.engine.hooks import preemption

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')

pytestmark = pytest.mark.gpu


def tiny_cfg(work_dir, max_iters):
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(work_dir)
    cfg.train_cfg.update(max_iters=max_iters, val_interval=100)
    cfg.default_hooks.checkpoint.update(interval=2)
    return cfg


def test_resume_on_the_gpu(tmp_path):
    """Item 1 of the GPU read: a resume on a GPU crashed at the first new batch on the
    checkpoint's CUDA generator states; the resumed run equals the uninterrupted one."""
    torch.manual_seed(0)
    IrtboxRunner.from_cfg(tiny_cfg(tmp_path / 'straight', 4)).train()
    IrtboxRunner.from_cfg(tiny_cfg(tmp_path / 'cut', 2)).train()
    cfg = tiny_cfg(tmp_path / 'cut', 4)
    cfg.resume = True
    runner = IrtboxRunner.from_cfg(cfg)
    runner.train()
    assert runner.iter == 4
    assert next(runner.model.parameters()).is_cuda
    from irtbox.utils.checkpoint import safe_torch_load
    straight = safe_torch_load(str(tmp_path / 'straight' / 'iter_4.pth'))['state_dict']
    resumed = safe_torch_load(str(tmp_path / 'cut' / 'iter_4.pth'))['state_dict']
    for key, value in straight.items():
        torch.testing.assert_close(resumed[key], value, msg=key)


def test_the_cuda_generator_state_is_the_current_devices():
    """Item 2: one state, this device's, restored into this device."""
    torch.cuda.init()
    torch.cuda.manual_seed(5)
    state = preemption.rng_state()
    assert isinstance(state['cuda'], torch.Tensor)
    expected = torch.rand(3, device='cuda')
    torch.cuda.manual_seed(9)
    preemption.set_rng_state({k: v.cuda() if k == 'cuda' else v for k, v in state.items()})
    torch.testing.assert_close(torch.rand(3, device='cuda'), expected)


def test_nccl_takes_the_configs_timeout(tmp_path, monkeypatch):
    """Item 5: the shipped dist_cfg (backend nccl, 2 h timeout) starts a group."""
    import torch.distributed as dist

    from irtbox.apis.run_setup import dist_cfg_of
    from irtbox.utils.dist import free_port, init_distributed
    cfg = Config.fromfile(TINY)
    for key, value in dict(RANK='0', WORLD_SIZE='1', LOCAL_RANK='0', MASTER_ADDR='127.0.0.1',
                           MASTER_PORT=str(free_port())).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr('irtbox.utils.dist.exit_with_parent', lambda: None)
    kwargs = dist_cfg_of(cfg)
    assert kwargs['backend'] == 'nccl' and kwargs['timeout'] >= 3600
    init_distributed('pytorch', **kwargs)
    try:
        value = torch.ones(1, device='cuda')
        dist.all_reduce(value)
        assert value.item() == 1
    finally:
        dist.destroy_process_group()


def test_partial_fc_resumes_on_the_gpu(tmp_path):
    """Item 7: a Partial FC checkpoint is loaded onto the CPU, its rows cut there, then
    copied to the GPU layer."""
    losses = dict(arcface=dict(type='ArcFaceLoss', num_classes=12, embed_dim=32,
                               partial_fc=dict(sample_rate=1.0, seed=0)))
    cfg = tiny_cfg(tmp_path, 2)
    cfg.model.head.losses = losses
    cfg.model.head.pop('loss_weights', None)
    IrtboxRunner.from_cfg(cfg).train()
    cfg = tiny_cfg(tmp_path, 3)
    cfg.model.head.losses = losses
    cfg.model.head.pop('loss_weights', None)
    cfg.resume = True
    runner = IrtboxRunner.from_cfg(cfg)
    runner.train()
    assert runner.iter == 3
    centres = [p for name, p in runner.model.named_parameters() if 'class_weights' in name]
    assert centres and all(p.is_cuda for p in centres)


def test_the_speed_settings_take_effect_on_the_gpu(tmp_path):
    """Issue 47 item 10 on a real GPU (their CPU simulations: test_irtbox_runner.py,
    test_timm_backbone.py, test_image_retriever.py): cudnn.benchmark for the fixed-size tiny
    config, fused AdamW, channels_last convolutions, and a bf16 test forward whose float32
    descriptors agree with float32 ones."""
    import torch.nn.functional as F

    from irtbox.engine.hooks.utils import bare_model
    from irtbox.engine.optim_wrappers import bf16_autocast_available
    cfg = tiny_cfg(tmp_path, 2)
    cfg.optim_wrapper.type = 'BF16AutocastOptimWrapper'
    cfg.model.backbone.channels_last = True
    runner = IrtboxRunner.from_cfg(cfg)
    assert torch.backends.cudnn.benchmark
    runner.train()
    assert runner.optim_wrapper.optimizer.defaults['fused'] is True
    model = bare_model(runner).eval()
    assert model.bf16_inference is bf16_autocast_available()
    seen = []
    model.backbone.model.patch_embed.proj.register_forward_pre_hook(lambda m, args: seen.append(
        args[0].is_contiguous(memory_format=torch.channels_last)))
    x = torch.randn(4, 3, 32, 32, device='cuda')
    with torch.no_grad():
        model.bf16_inference = True
        bf16 = model(x, mode='tensor')
        model.bf16_inference = False
        fp32 = model(x, mode='tensor')
    assert seen == [True, True] and bf16.dtype == torch.float32
    assert F.cosine_similarity(bf16, fp32).min() > 0.99
