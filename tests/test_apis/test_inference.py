"""init_model: weights from .pth and .safetensors, no backbone download when a checkpoint is
given, training-only parts optional, anything else refused with the keys at fault."""
import os.path as osp

import pytest
import torch
from safetensors.torch import save_file

from irtbox.apis import CheckpointMismatchError, init_model, without_pretrained_backbone
from irtbox.utils.config import load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
DEIT = osp.join(ROOT, 'configs', 'irt', 'irt-r_deit-s_1xb64-35k_sop.py')


def embed(model):
    torch.manual_seed(1)
    with torch.no_grad():
        return model(torch.randn(2, 3, 32, 32), mode='tensor')


@pytest.fixture
def trained(tmp_path):
    torch.manual_seed(0)
    model = init_model(TINY)
    return model, model.state_dict(), tmp_path


@pytest.mark.parametrize('fmt', ['pth', 'safetensors'])
def test_formats(fmt, trained):
    model, state, tmp_path = trained
    path = str(tmp_path / f'w.{fmt}')
    if fmt == 'pth':
        torch.save({'state_dict': state, 'meta': {}}, path)
    else:
        save_file({k: v.contiguous() for k, v in state.items()}, path)
    assert torch.equal(embed(init_model(TINY, path)), embed(model))


def test_training_only_parts_may_be_absent(trained):
    model, state, tmp_path = trained
    path = str(tmp_path / 'inference.pth')
    torch.save({k: v for k, v in state.items() if not k.startswith('head.')}, path)
    assert any(k.startswith('head.') for k in state)
    assert torch.equal(embed(init_model(TINY, path)), embed(model))


@pytest.mark.parametrize('change, message', [
    (lambda s: s.pop('backbone.model.cls_token'), r"missing keys \['backbone.model.cls_token'\]"),
    (lambda s: s.update(extra=torch.zeros(1)), r"unexpected keys \['extra'\]"),
    (lambda s: s.update({'backbone.model.cls_token': torch.zeros(1, 1, 8)}),
     r'backbone.model.cls_token: checkpoint \(1, 1, 8\) vs model \(1, 1, 32\)'),
])
def test_mismatch_is_refused(change, message, trained):
    _, state, tmp_path = trained
    state = dict(state)
    change(state)
    path = str(tmp_path / 'bad.pth')
    torch.save(state, path)
    with pytest.raises(CheckpointMismatchError, match=message):
        init_model(TINY, path)


@pytest.mark.slow
def test_checkpoint_means_no_backbone_download(tmp_path, monkeypatch):
    """The SOP config builds DeiT-S with timm's pretrained weights; with a checkpoint
    nothing is downloaded (the checkpoint has the weights), so this works offline."""
    import timm
    cfg = load_config(DEIT)
    assert cfg.model.backbone.pretrained is True
    create = timm.create_model
    calls = []

    def no_download(name, pretrained=False, **kwargs):
        calls.append(pretrained)
        return create(name, pretrained=False, **kwargs)
    monkeypatch.setattr(timm, 'create_model', no_download)
    model = init_model(without_pretrained_backbone(cfg))
    path = str(tmp_path / 'deit.pth')
    torch.save(model.state_dict(), path)
    init_model(DEIT, path)
    assert calls == [False, False]
    assert load_config(DEIT).model.backbone.pretrained is True  # the config is not changed


def test_the_model_goes_where_the_one_device_rule_says(monkeypatch):
    """device=None is resolve_device's choice: with CUDA (simulated: rank 1's GPU current) this
    rank's GPU, not GPU 0 nor the CPU; without, the CPU; a bare 'cuda' is this rank's GPU."""
    from tests.gpu_semantics import FakeCuda
    placed = []
    monkeypatch.setattr(torch.nn.Module, 'to', lambda self, device: placed.append(device) or self)
    init_model(TINY)
    FakeCuda(monkeypatch, count=2, current=1)
    init_model(TINY)
    init_model(TINY, device='cuda')
    init_model(TINY, device='cpu')
    assert placed == [torch.device('cpu'), torch.device('cuda', 1), torch.device('cuda', 1),
                      torch.device('cpu')]
