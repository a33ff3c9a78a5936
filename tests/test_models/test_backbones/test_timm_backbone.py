import functools
import http.server
import threading

import pytest
import torch

from irtbox.models.backbones import TimmBackbone
from irtbox.structures import ViTFeatures


def tiny_vit(**kwargs):
    return TimmBackbone('vit_tiny_patch16_224', img_size=32, patch_size=8, depth=2, **kwargs)


def test_vit_last_layer_matches_forward_features():
    torch.manual_seed(0)
    backbone = tiny_vit().eval()
    x = torch.randn(2, 3, 32, 32)
    (feats,) = backbone(x)
    assert isinstance(feats, ViTFeatures)
    prefix, grid = feats.prefix, feats.grid
    tokens = backbone.model.forward_features(x)
    assert prefix.shape == (2, 1, 192) and grid.shape == (2, 192, 4, 4)
    torch.testing.assert_close(prefix[:, 0], tokens[:, 0])
    torch.testing.assert_close(grid.flatten(2).transpose(1, 2), tokens[:, 1:])


def test_vit_several_layers_and_distillation_token():
    backbone = TimmBackbone('deit_tiny_distilled_patch16_224', img_size=32, patch_size=8,
                            depth=3, out_indices=(0, -1)).eval()
    outs = backbone(torch.randn(1, 3, 32, 32))
    assert backbone.out_indices == (0, 2)
    assert [tuple(p.shape) for p, _ in outs] == [(1, 2, 192), (1, 2, 192)]


@pytest.mark.slow
def test_cnn_returns_maps():
    backbone = TimmBackbone('resnet18').eval()
    (feat,) = backbone(torch.randn(1, 3, 64, 64))
    assert feat.shape == (1, 512, 2, 2)


def test_bad_arguments():
    with pytest.raises(ValueError, match='unknown timm model_name'):
        TimmBackbone('no_such_model')
    with pytest.raises(ValueError, match='out of range'):
        tiny_vit(out_indices=5)


@pytest.mark.slow
def test_checkpoint_from_file_with_prefix(tmp_path):
    torch.manual_seed(1)
    src = tiny_vit()
    path = tmp_path / 'w.pth'
    torch.save({'state_dict': {f'module.{k}': v for k, v in src.model.state_dict().items()}}, path)
    dst = tiny_vit(checkpoint=str(path))
    for key, value in src.model.state_dict().items():
        torch.testing.assert_close(dst.model.state_dict()[key], value)


@pytest.mark.slow
def test_checkpoint_for_another_model_is_refused(tmp_path):
    path = tmp_path / 'resnet.pth'
    torch.save(TimmBackbone('resnet18').model.state_dict(), path)
    with pytest.raises(ValueError, match='no weight'):
        tiny_vit(checkpoint=str(path))


@pytest.mark.slow
def test_checkpoint_from_url(tmp_path, monkeypatch):
    """Downloads from a local HTTP server into irtbox's cache, hash-checked by file name."""
    import hashlib
    torch.manual_seed(2)
    src = tiny_vit()
    served = tmp_path / 'served'
    served.mkdir()
    tmp = served / 'tmp.pth'
    torch.save(src.model.state_dict(), tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()[:8]
    tmp.rename(served / f'vit-{digest}.pth')
    (served / 'bad-00000000.pth').write_bytes((served / f'vit-{digest}.pth').read_bytes())
    monkeypatch.setenv('IRTBOX_HOME', str(tmp_path / 'home'))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f'http://127.0.0.1:{server.server_port}'
        dst = tiny_vit(checkpoint=f'{url}/vit-{digest}.pth')
        torch.testing.assert_close(dst.model.state_dict()['cls_token'], src.model.state_dict()['cls_token'])
        assert (tmp_path / 'home' / 'checkpoints' / f'vit-{digest}.pth').is_file()
        with pytest.raises(RuntimeError, match='sha256 mismatch'):
            tiny_vit(checkpoint=f'{url}/bad-00000000.pth')
        assert not (tmp_path / 'home' / 'checkpoints' / 'bad-00000000.pth').exists()
    finally:
        server.shutdown()
        server.server_close()


# Dynamic position embedding, CPE, final-norm modes (DToP).

import math  # noqa: E402

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from irtbox.models.backbones.timm_backbone import pad_same, resize_grid_pos_embed  # noqa: E402

POS_MODES = ('dpe-bilinear', 'dpe-bicubic', 'none', 'cpe')


def _interp_matrix(n_in, n_out, mode):
    """n_out x n_in weights of 1-D interpolation, align_corners False, no antialias
    (bilinear: linear between neighbours, source clamped at 0; bicubic: Keys, a = -0.75,
    taps clamped to the border)."""
    a = -0.75
    w = np.zeros((n_out, n_in))
    for i in range(n_out):
        src = (i + 0.5) * n_in / n_out - 0.5
        if mode == 'bilinear':
            src = max(src, 0.0)
            i0 = int(math.floor(src))
            t = src - i0
            w[i, i0] += 1 - t
            w[i, min(i0 + 1, n_in - 1)] += t
            continue
        i0 = int(math.floor(src))
        t = src - i0
        for tap, dist in zip(range(i0 - 1, i0 + 3), (1 + t, t, 1 - t, 2 - t)):
            if dist <= 1:
                k = (a + 2) * dist ** 3 - (a + 3) * dist ** 2 + 1
            else:
                k = a * dist ** 3 - 5 * a * dist ** 2 + 8 * a * dist - 4 * a
            w[i, min(max(tap, 0), n_in - 1)] += k
    return w


@pytest.mark.parametrize('mode', ['bilinear', 'bicubic'])
@pytest.mark.parametrize('size', [(24, 24), (22, 32), (17, 17), (12, 12), (32, 22)])
def test_resize_grid_pos_embed_against_brute_force(mode, size):
    torch.manual_seed(0)
    grid = torch.randn(1, 5, 24, 24, dtype=torch.float64)
    out = resize_grid_pos_embed(grid, size, mode)
    wh, ww = _interp_matrix(24, size[0], mode), _interp_matrix(24, size[1], mode)
    expected = np.einsum('hi,dij,wj->dhw', wh, grid[0].numpy(), ww)
    torch.testing.assert_close(out[0], torch.from_numpy(expected))
    if size == (24, 24):  # identity at the native grid, bit for bit
        assert torch.equal(out, grid)


def test_pad_same_centres_the_grid():
    x = torch.ones(1, 1, 30, 35)
    y = pad_same(x, (16, 16))
    assert y.shape == (1, 1, 32, 48)
    # 2 rows: 1 before, 1 after; 13 columns: 6 before, 7 after
    assert y[0, 0, :, 0].sum() == 0 and y[0, 0, 0].sum() == 0 and y[0, 0, 1, 6:41].all()
    assert y[0, 0, 31].sum() == 0 and y[0, 0, :, 41:].sum() == 0
    assert torch.equal(pad_same(torch.ones(1, 1, 32, 16), (16, 16)), torch.ones(1, 1, 32, 16))


def _same_weights(dst, src):
    """``dst`` with the weights of ``src`` (a 'none' / 'cpe' source has no position embedding:
    ``dst`` keeps its own)."""
    missing, unexpected = dst.model.load_state_dict(src.model.state_dict(), strict=False)
    assert not unexpected and set(missing) <= {'pos_embed'}
    return dst.eval()


NATIVE_CASES = {
    # plain ViT with two register tokens: prefix CLS + REG
    'vit-reg': dict(model_name='vit_tiny_patch16_224', img_size=32, patch_size=8, depth=2,
                    reg_tokens=2),
    # DeiT with distillation token, non-square native grid
    'deit-dist': dict(model_name='deit_tiny_distilled_patch16_224', img_size=(32, 48),
                      patch_size=8, depth=2),
    # DeiT-3: position embedding not covering the CLS token
    'deit3': dict(model_name='deit3_small_patch16_224', img_size=32, patch_size=8, depth=2),
    # hybrid R50 + ViT-B/16 at a small native size (4 x 4 tokens)
    'hybrid': dict(model_name='vit_base_r50_s16_384', img_size=64, depth=2),
}


@pytest.mark.slow
@pytest.mark.parametrize('case', list(NATIVE_CASES))
def test_dpe_equals_timm_at_native_grid(case):
    """DPE at the native grid gives timm's own forward exactly, raw and normed."""
    kwargs = NATIVE_CASES[case]
    h, w = (kwargs['img_size'],) * 2 if isinstance(kwargs['img_size'], int) else kwargs['img_size']
    torch.manual_seed(0)
    x = torch.randn(1, 3, h, w)
    backbone = TimmBackbone(out_indices=(0, 1), pos_embed='dpe-bilinear', **kwargs).eval()
    for norm in ('none', 'all'):
        backbone.norm = norm
        with torch.no_grad():
            ref = backbone.model.forward_intermediates(
                x, indices=[0, 1], norm=norm == 'all', return_prefix_tokens=True,
                intermediates_only=True)
        for mode in ('dpe-bilinear', 'dpe-bicubic'):
            backbone.pos_embed_mode = mode  # same weights, the other interpolation
            with torch.no_grad():
                for (g_ref, p_ref), (p, g) in zip(ref, backbone(x)):
                    assert p.shape[1] == backbone.model.num_prefix_tokens
                    torch.testing.assert_close(p, p_ref, rtol=0, atol=0)
                    torch.testing.assert_close(g, g_ref, rtol=0, atol=0)


def _test_sizes(base=384):
    """384 x 384, a group-size batch 352 x 512, and the test scales 1/sqrt(2) and 1/2 as
    the retriever makes them (F.interpolate, scale_factor: 271 is off the patch grid)."""
    sizes = [(base, base), (352, 512)]
    for scale in (1 / math.sqrt(2), 0.5):
        sizes.append(tuple(F.interpolate(torch.zeros(1, 1, base, base), scale_factor=scale,
                                         mode='bilinear', align_corners=False).shape[-2:]))
    return sizes


@pytest.fixture(scope='module')
def hybrid():
    torch.manual_seed(0)
    return TimmBackbone('vit_base_r50_s16_384', depth=2, out_indices=(-2, -1), norm='all',
                        pos_embed='dpe-bilinear').eval()


@pytest.mark.slow
def test_hybrid_shapes_any_size(hybrid):
    assert hybrid.model.patch_embed.grid_size == (24, 24)
    with torch.no_grad():
        for h, w in _test_sizes():
            outs = hybrid(torch.randn(1, 3, h, w))
            assert len(outs) == 2
            for prefix, grid in outs:
                assert prefix.shape == (1, 1, 768)
                assert grid.shape == (1, 768, math.ceil(h / 16), math.ceil(w / 16)), (h, w)


@pytest.mark.slow
def test_deit_distilled_shapes_any_size():
    torch.manual_seed(0)
    backbone = TimmBackbone('deit_base_distilled_patch16_384', depth=2, pos_embed='dpe-bicubic',
                            out_indices=(-2, -1), norm=True).eval()
    assert backbone.norm == 'all' and backbone.out_indices == (0, 1)
    with torch.no_grad():
        for h, w in _test_sizes() + [(300, 250)]:
            for prefix, grid in backbone(torch.randn(1, 3, h, w)):
                assert prefix.shape == (1, 2, 768)
                assert grid.shape == (1, 768, math.ceil(h / 16), math.ceil(w / 16)), (h, w)


def _block_inputs(backbone, x, blocks=(0, 1)):
    """The token sequences entering the given ViT blocks."""
    seen = {}
    hooks = [backbone.model.blocks[i].register_forward_pre_hook(
        lambda mod, args, i=i: seen.__setitem__(i, args[0])) for i in blocks]
    with torch.no_grad():
        backbone(x)
    for hook in hooks:
        hook.remove()
    return seen


@pytest.mark.slow
def test_dpe_prefix_untouched_and_modes_differ_off_grid():
    kwargs = dict(model_name='deit_tiny_distilled_patch16_224', img_size=32, patch_size=8,
                  depth=2)
    torch.manual_seed(0)
    bilinear = TimmBackbone(pos_embed='dpe-bilinear', **kwargs).eval()
    bicubic = _same_weights(TimmBackbone(pos_embed='dpe-bicubic', **kwargs), bilinear)
    model = bilinear.model
    expected_prefix = torch.cat([model.cls_token, model.dist_token], 1) + model.pos_embed[:, :2]
    for h, w in [(32, 32), (40, 56), (27, 45)]:
        x = torch.randn(1, 3, h, w)
        tok_bl, tok_bc = _block_inputs(bilinear, x)[0], _block_inputs(bicubic, x)[0]
        gh, gw = math.ceil(h / 8), math.ceil(w / 8)
        assert tok_bl.shape == (1, 2 + gh * gw, 192)
        torch.testing.assert_close(tok_bl[:, :2], expected_prefix, rtol=0, atol=0)
        torch.testing.assert_close(tok_bc[:, :2], expected_prefix, rtol=0, atol=0)
        same = torch.equal(tok_bl, tok_bc)
        assert same == ((h, w) == (32, 32))


@pytest.mark.slow
def test_none_is_dpe_with_a_zero_position_embedding():
    kwargs = dict(model_name='vit_tiny_patch16_224', img_size=32, patch_size=8, depth=2,
                  out_indices=(0, 1))
    torch.manual_seed(0)
    none = TimmBackbone(pos_embed='none', **kwargs).eval()
    zero = _same_weights(TimmBackbone(pos_embed='dpe-bilinear', **kwargs), none)
    with torch.no_grad():
        zero.model.pos_embed.zero_()
        x = torch.randn(2, 3, 40, 24)
        for (p0, g0), (p1, g1) in zip(none(x), zero(x)):
            torch.testing.assert_close(p0, p1)
            torch.testing.assert_close(g0, g1)


@pytest.mark.slow
def test_cpe_is_a_residual_depthwise_conv_after_the_first_block():
    kwargs = dict(model_name='deit_tiny_distilled_patch16_224', img_size=32, patch_size=8,
                  depth=2)
    torch.manual_seed(0)
    cpe = TimmBackbone(pos_embed='cpe', **kwargs).eval()
    none = _same_weights(TimmBackbone(pos_embed='none', **kwargs), cpe)
    assert cpe.cpe.weight.shape == (192, 1, 3, 3) and cpe.cpe.groups == 192
    x = torch.randn(2, 3, 40, 24)
    with torch.no_grad():  # zero-initialised: starts as the 'none' network
        torch.testing.assert_close(cpe(x)[0].grid, none(x)[0].grid, rtol=0, atol=0)
        cpe.cpe.weight.normal_()
        cpe.cpe.bias.normal_()
    seen = _block_inputs(cpe, x)
    with torch.no_grad():
        after_first = cpe.model.blocks[0](seen[0])
    grid = after_first[:, 2:].transpose(1, 2).reshape(2, 192, 5, 3)
    grid = grid + F.conv2d(grid, cpe.cpe.weight, cpe.cpe.bias, padding=1, groups=192)
    torch.testing.assert_close(seen[1][:, :2], after_first[:, :2])
    torch.testing.assert_close(seen[1][:, 2:], grid.flatten(2).transpose(1, 2))
    cpe.train()
    cpe(x)[0].grid.sum().backward()
    assert cpe.cpe.weight.grad.abs().sum() > 0


@pytest.mark.parametrize('mode', ['timm', 'dpe-bilinear'])
def test_norm_modes(mode):
    """'none': raw blocks; 'last': final norm on the last block only; 'all': on every block."""
    torch.manual_seed(0)
    backbone = tiny_vit(out_indices=(0, 1), norm='none', pos_embed=mode).eval()
    x = torch.randn(1, 3, 32, 32)
    raw = _block_inputs(backbone, x, blocks=(1,))[1]  # output of block 0
    with torch.no_grad():
        raw = (raw, backbone.model.blocks[1](raw))
        outs = {}
        for norm in ('none', 'last', 'all'):
            backbone.norm = norm
            outs[norm] = backbone(x)
    for norm, normed in (('none', ()), ('last', (1,)), ('all', (0, 1))):
        for i, (prefix, grid) in enumerate(outs[norm]):
            tokens = backbone.model.norm(raw[i]) if i in normed else raw[i]
            torch.testing.assert_close(prefix, tokens[:, :1])
            torch.testing.assert_close(grid.flatten(2).transpose(1, 2), tokens[:, 1:])


@pytest.mark.slow
def test_negative_out_indices_last_k():
    backbone = TimmBackbone('vit_tiny_patch16_224', img_size=32, patch_size=8, depth=6,
                            out_indices=(-3, -2, -1), norm='all', pos_embed='dpe-bilinear').eval()
    assert backbone.out_indices == (3, 4, 5)
    with torch.no_grad():
        outs = backbone(torch.randn(1, 3, 20, 44))
    assert [tuple(g.shape) for _, g in outs] == [(1, 192, 3, 6)] * 3


@pytest.mark.slow
def test_pit_dynamic_position_embedding():
    torch.manual_seed(0)
    backbone = TimmBackbone('pit_ti_distilled_224', pos_embed='dpe-bilinear',
                            out_indices=(-2, -1)).eval()
    assert backbone.num_layers == 12 and backbone.embed_dim == 256
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():  # native size: the last CLS/DIST pair is timm's forward_features
        prefix, grid = backbone(x)[-1]
        torch.testing.assert_close(prefix, backbone.model.forward_features(x), rtol=0, atol=0)
        assert grid.shape == (1, 256, 7, 7)
        outs = backbone(torch.randn(1, 3, 352, 512))
    shapes = [(tuple(p.shape), tuple(g.shape)) for p, g in outs]
    assert shapes == [((1, 2, 256), (1, 256, 11, 16))] * 2
    with pytest.raises(ValueError, match="norm='all' with pit_ti_224.*width"):
        TimmBackbone('pit_ti_224', pos_embed='none', norm='all', out_indices=(-5, -1))


@pytest.mark.slow
def test_pos_embed_errors():
    with pytest.raises(ValueError, match="pos_embed='dpe'; expected one of"):
        tiny_vit(pos_embed='dpe')
    with pytest.raises(ValueError, match='norm=.first.; expected one of'):
        tiny_vit(norm='first')
    for name, cls in (('resnet18', 'ResNet'), ('eva02_tiny_patch14_224', 'Eva')):
        match = f"pos_embed='cpe' with model_name='{name}' \\({cls}\\).*use pos_embed='timm'"
        with pytest.raises(ValueError, match=match):
            TimmBackbone(name, pos_embed='cpe')
    with pytest.raises(ValueError, match='patch dropout'):
        tiny_vit(pos_embed='dpe-bilinear', patch_drop_rate=0.5)


@pytest.mark.slow
def test_gradient_checkpointing_gives_the_same_outputs_and_gradients():
    torch.manual_seed(0)
    backbone = tiny_vit(out_indices=(0, 1), norm='all', pos_embed='cpe').train()
    with torch.no_grad():
        backbone.cpe.weight.normal_()
    x = torch.randn(2, 3, 24, 40)
    results = []
    for enable in (False, True):
        backbone.model.set_grad_checkpointing(enable)
        backbone.zero_grad()
        loss = sum(p.sum() + g.square().sum() for p, g in backbone(x))
        loss.backward()
        results.append((loss.detach(), backbone.cpe.weight.grad.clone(),
                        backbone.model.blocks[0].attn.qkv.weight.grad.clone()))
    for plain, checkpointed in zip(*results):
        torch.testing.assert_close(checkpointed, plain)


def _first_conv_input_format(backbone, x):
    """The memory format of the input that reaches the backbone's first convolution."""
    seen = []
    conv = next(m for m in backbone.model.modules() if isinstance(m, torch.nn.Conv2d))
    handle = conv.register_forward_pre_hook(lambda module, args: seen.append(
        args[0].is_contiguous(memory_format=torch.channels_last)))
    try:
        out = backbone(x)
    finally:
        handle.remove()
    return ('channels_last' if seen[0] else 'contiguous'), out


def test_cnn_parts_run_channels_last_on_a_gpu_only():
    """Issue 47 item 10: a backbone with convolutional parts (a CNN, the R50 stem of DToP's
    hybrid) takes its batches channels_last on a GPU, where cuDNN's convolutions are faster
    so; a ViT's one patch convolution is left as it is, and so is every CPU run (the same
    output, bit for bit). ``channels_last`` True / False forces it on a GPU."""
    from tests.gpu_semantics import DeviceTensor
    assert TimmBackbone('test_resnet').channels_last
    assert TimmBackbone('vit_tiny_r_s16_p8_224', img_size=32, depth=1).channels_last  # R26 + ViT
    assert not tiny_vit().channels_last
    assert tiny_vit(channels_last=True).channels_last
    torch.manual_seed(0)
    cnn = TimmBackbone('test_resnet', out_indices=(-2, -1)).eval()
    x = torch.randn(2, 3, 32, 32)
    fmt, on_cpu = _first_conv_input_format(cnn, x)
    assert fmt == 'contiguous'
    cnn.channels_last = False
    for a, b in zip(on_cpu, cnn(x)):
        assert torch.equal(a, b)
    cnn.channels_last = True
    assert _first_conv_input_format(cnn, x.as_subclass(DeviceTensor))[0] == 'channels_last'
    cnn.channels_last = False
    assert _first_conv_input_format(cnn, x.as_subclass(DeviceTensor))[0] == 'contiguous'
