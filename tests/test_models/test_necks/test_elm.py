import pytest
import torch
import torch.nn as nn

from irtbox.models.necks import ASPP, EnhancedLocalityModule, InvertedResidual, WaveBlock


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def irb_params(c, t):
    # 1x1 expand + BN, depthwise 3x3 + BN, 1x1 project + BN (convs without bias).
    return c * c * t + 2 * c * t + 9 * c * t + 2 * c * t + c * t * c + 2 * c


def aspp_params(c, n_rates):
    branch_1x1 = c * c + 2 * c
    branch_3x3 = 9 * c * c + 2 * c
    image_pool = c * c + c
    project = (n_rates + 2) * c * c + 2 * c
    return branch_1x1 + n_rates * branch_3x3 + image_pool + project


@pytest.mark.parametrize('h', [24, 22, 32, 5, 2, 1])
def test_waveblock_training_keeps_one_band(h):
    torch.manual_seed(h)
    wave = WaveBlock(ratio=0.3, factor=1.5).train()
    band = max(1, round(0.3 * h))
    starts = set()
    for _ in range(20):
        x = torch.rand(2, 3, h, 5) + 0.5
        ratio = wave(x) / x
        rows = ratio[0, 0, :, 0]
        # One factor per row, shared by batch, channels and columns.
        torch.testing.assert_close(ratio, rows.view(1, 1, h, 1).expand_as(ratio))
        kept = torch.isclose(rows, torch.ones(h)).nonzero().flatten().tolist()
        scaled = torch.isclose(rows, torch.full((h,), 1.5)).nonzero().flatten().tolist()
        assert len(kept) == band and len(kept) + len(scaled) == h
        assert kept == list(range(kept[0], kept[0] + band))  # contiguous
        starts.add(kept[0])
    if h - band > 0:
        assert len(starts) > 1  # the band moves


def test_waveblock_is_identity_in_eval_mode():
    wave = WaveBlock().eval()
    x = torch.randn(2, 3, 24, 24)
    assert torch.equal(wave(x), x)
    with pytest.raises(ValueError, match='ratio'):
        WaveBlock(ratio=0.0)


def test_inverted_residual_is_residual():
    irb = InvertedResidual(8, expand_ratio=6).eval()
    assert n_params(irb) == irb_params(8, 6)
    x = torch.randn(2, 8, 5, 7)
    assert irb(x).shape == x.shape
    last_bn = irb.block[-1][1]
    nn.init.zeros_(last_bn.weight)
    nn.init.zeros_(last_bn.bias)
    torch.testing.assert_close(irb(x), x)  # the block branch is zero: x + 0


def test_aspp_shapes_and_size():
    aspp = ASPP(8, rates=(1, 2, 3))
    assert n_params(aspp) == aspp_params(8, 3)
    assert [b[0].dilation for b in aspp.branches[1:]] == [(1, 1), (2, 2), (3, 3)]
    for h, w in [(24, 24), (22, 32), (1, 1), (3, 2)]:
        assert aspp(torch.randn(2, 8, h, w)).shape == (2, 8, h, w)
    # Works on a training batch of one (no BatchNorm on the 1 x 1 pooled branch).
    aspp.train()(torch.randn(1, 8, 4, 4))


def test_aspp_image_pool_sees_the_whole_map():
    torch.manual_seed(0)
    aspp = ASPP(4, rates=(1,)).eval()
    x = torch.randn(1, 4, 9, 9)
    y = x.clone()
    y[..., 0, 0] += 5.0  # far corner: outside the 3x3 reach of the centre, inside the pool
    assert not torch.allclose(aspp(x)[..., 4, 4], aspp(y)[..., 4, 4])


def test_elm_shapes_size_and_switches():
    d, c = 768, 64
    elm = EnhancedLocalityModule(d)
    expected = (d * c + c) + irb_params(c, 6) + aspp_params(c, 3) + (c * d + d)
    assert n_params(elm) == expected
    assert elm(torch.randn(2, d, 22, 32)).shape == (2, d, 22, 32)
    small = EnhancedLocalityModule(16, channels=4, irb=False, aspp=False, waveblock=False)
    assert isinstance(small.irb, nn.Identity) and isinstance(small.aspp, nn.Identity)
    assert isinstance(small.waveblock, nn.Identity)
    assert n_params(small) == (16 * 4 + 4) + (4 * 16 + 16)
    # Without IRB, ASPP and WaveBlock the ELM is the two 1x1 convs.
    x = torch.randn(2, 16, 3, 4)
    expected = small.expand(small.reduce(x))
    torch.testing.assert_close(small.train()(x), expected)
    only_aspp = EnhancedLocalityModule(16, channels=4, irb=False, waveblock=False,
                                       aspp_rates=(3, 6, 9))
    assert isinstance(only_aspp.aspp, ASPP) and len(only_aspp.aspp.branches) == 4


def test_elm_waveblock_only_in_training():
    torch.manual_seed(0)
    elm = EnhancedLocalityModule(16, channels=4)
    no_wave = EnhancedLocalityModule(16, channels=4, waveblock=False)
    no_wave.load_state_dict(elm.state_dict())
    x = torch.randn(2, 16, 10, 6)
    elm.eval(), no_wave.eval()
    torch.testing.assert_close(elm(x), no_wave(x))
    elm.train(), no_wave.train()
    out, ref = elm(x), no_wave(x)
    rows = (out / ref)[0, 0, :, 0]
    assert torch.isclose(rows, torch.ones(10)).sum() == 3
