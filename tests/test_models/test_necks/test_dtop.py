import pytest
import torch
import torch.nn as nn

from irtbox.apis import register_all_modules
from irtbox.models.necks import DToPNeck, LayerAggregation, aggregate_layers
from irtbox.registry import MODELS
from irtbox.structures import ViTFeatures

register_all_modules()


def layers(k=3, b=2, d=8, h=4, w=5, prefix=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(ViTFeatures(torch.randn(b, prefix, d, generator=g),
                             torch.randn(b, d, h, w, generator=g)) for _ in range(k))


ELM = dict(type='EnhancedLocalityModule', channels=4)


def small(fusion=None, **kwargs):
    """A D = 8 neck with a C = 4 ELM; ``fusion``: a FeatureFusion mode ('y' drops the ELM)."""
    torch.manual_seed(0)
    if fusion is not None:
        kwargs['fusion'] = dict(type='FeatureFusion', mode=fusion)
        if fusion == 'y':
            kwargs.setdefault('elm', None)
    return DToPNeck(**dict(dict(in_channels=8, elm=ELM), **kwargs))


def n_params(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.slow
@pytest.mark.parametrize('h,w', [(24, 24), (22, 32)])
def test_default_shapes_at_training_grids(h, w):
    # 384 x 384 -> 24 x 24 tokens; a group-size batch of 352 x 512 -> 22 x 32.
    neck = DToPNeck()
    feats = layers(k=6, b=2, d=768, h=h, w=w, prefix=1)
    assert neck.train()(feats).shape == (2, 1536)
    assert neck.eval()(feats).shape == (2, 1536)
    assert neck.out_dim == 1536


@pytest.mark.slow
def test_shapes_at_test_scale_grids():
    # Both training sizes at the test scales 1/sqrt(2), 1, sqrt(2): ceil(side * s / 16) tokens.
    neck = DToPNeck(in_channels=32).eval()
    for side_h, side_w in ((384, 384), (352, 512)):
        for s in (2 ** -0.5, 1.0, 2 ** 0.5):
            h, w = -(-round(side_h * s) // 16), -(-round(side_w * s) // 16)
            assert neck(layers(k=6, d=32, h=h, w=w, prefix=1)).shape == (2, 64)
    assert neck(layers(k=6, d=32, h=1, w=1)).shape == (2, 64)


def test_parameter_budget_at_defaults():
    neck = DToPNeck(in_channels=768, num_layers=6)
    total = n_params(neck)
    assert 0.25e6 <= total <= 0.35e6, total
    # All of it is the ELM plus GeM's exponent: no fold or projection layer at the defaults.
    assert total == n_params(neck.elm) + 1
    assert neck.proj is None and neck.fold is None


def test_default_forward_against_an_independent_computation():
    neck = small().eval()
    feats = layers(k=3, prefix=1)
    u = torch.stack([p[:, 0] for p, _ in feats]).mean(0)
    y_map = torch.stack([g for _, g in feats]).mean(0)
    big_u = neck.elm(y_map)
    coef = torch.einsum('bdhw,bdhw->bhw', y_map, big_u) / (
        torch.einsum('bdhw,bdhw->bhw', big_u, big_u) + 1e-6)
    fused = torch.cat([y_map - coef[:, None] * big_u, big_u], dim=1)
    pooled = fused.clamp(min=1e-6).pow(3).mean(dim=(2, 3)).pow(1 / 3)
    y = pooled[:, :8] + pooled[:, 8:]
    y_perp = y - (y @ u.T).diagonal()[:, None] / (u * u).sum(1, keepdim=True) * u
    torch.testing.assert_close(neck(feats), torch.cat([y_perp, u], dim=1))


def test_local_part_orthogonal_to_global_part():
    neck = DToPNeck(in_channels=64, elm=dict(type='EnhancedLocalityModule', channels=8)).eval()
    z = neck(layers(k=4, d=64, h=6, w=7))
    local, glob = z[:, :64], z[:, 64:]
    cos = (local * glob).sum(1) / (local.norm(dim=1) * glob.norm(dim=1))
    assert cos.abs().max() < 1e-5
    assert local.norm(dim=1).min() > 1e-3  # not trivially orthogonal


def test_aggregate_layers_by_hand():
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]])  # k = 2 layers, B x D = 1 x 2 flattened
    torch.testing.assert_close(aggregate_layers(x, 'mean'), torch.tensor([2.0, 4.0]))
    torch.testing.assert_close(aggregate_layers(x, 'sum'), torch.tensor([4.0, 8.0]))
    # logits (0, ln 3): weights (1/4, 3/4).
    logits = torch.tensor([0.0, torch.log(torch.tensor(3.0)).item()])
    torch.testing.assert_close(aggregate_layers(x, 'softmax', logits), torch.tensor([2.5, 5.0]))
    with pytest.raises(ValueError, match="mode='max'"):
        aggregate_layers(x, 'max')


def test_layer_aggregation_module():
    agg = LayerAggregation('softmax', num_layers=3)
    x = torch.randn(3, 2, 4, 5, 5)
    torch.testing.assert_close(agg(x), x.mean(0))  # logits start at 0
    agg(x).pow(2).sum().backward()
    assert agg.logits.grad is not None
    with pytest.raises(ValueError, match='num_layers=3 but got 2'):
        agg(x[:2])
    with pytest.raises(ValueError, match='give num_layers'):
        LayerAggregation('softmax')
    assert n_params(LayerAggregation('mean')) == 0


@pytest.mark.parametrize('aggregation,combine', [
    ('mean', lambda t: t.mean(0)), ('sum', lambda t: t.sum(0))])
def test_r2_aggregates_before_the_elm(aggregation, combine):
    neck = small(aggregation=aggregation).eval()
    feats = layers(k=3)
    merged = (ViTFeatures(combine(torch.stack([f.prefix for f in feats])),
                          combine(torch.stack([f.grid for f in feats]))),)
    torch.testing.assert_close(neck(feats), neck(merged))


def test_softmax_aggregation_weights_the_layers():
    neck = small(aggregation='softmax', num_layers=3).eval()
    with torch.no_grad():
        neck.global_agg.logits.copy_(torch.tensor([0.0, 1.0, 2.0]))
        neck.local_agg.logits.copy_(torch.tensor([2.0, 0.0, -1.0]))
    feats = layers(k=3)
    wg = torch.tensor([0.0, 1.0, 2.0]).softmax(0)
    wl = torch.tensor([2.0, 0.0, -1.0]).softmax(0)
    merged = (ViTFeatures(sum(wg[i] * feats[i].prefix for i in range(3)),
                          sum(wl[i] * feats[i].grid for i in range(3))),)
    plain = small().eval()
    plain.load_state_dict(neck.state_dict(), strict=False)
    torch.testing.assert_close(neck(feats), plain(merged))


def test_r1_fuses_per_layer_then_averages():
    neck = small(order='R1').eval()
    feats = layers(k=3)
    per_layer = torch.stack([neck((f,)) for f in feats])
    torch.testing.assert_close(neck(feats), per_layer.mean(0))
    assert not torch.allclose(neck(feats), small().eval()(feats))
    softmax = small(order='R1', aggregation='softmax', num_layers=3)
    assert softmax(feats).shape == (2, 16)


def test_global_token_choices_and_single_branches():
    feats = layers(k=2, prefix=2)
    cls = torch.stack([p[:, 0] for p, _ in feats]).mean(0)
    dist = torch.stack([p[:, 1] for p, _ in feats]).mean(0)
    patch = torch.stack([g.mean(dim=(2, 3)) for _, g in feats]).mean(0)
    for token, expected in (('cls', cls), ('dist', dist), ('patch', patch)):
        neck = small(branches='global', global_token=token)
        assert n_params(neck) == 0
        torch.testing.assert_close(neck(feats), expected)
    # The global part of the full descriptor is the chosen token.
    torch.testing.assert_close(small(global_token='dist').eval()(feats)[:, 8:], dist)
    with pytest.raises(ValueError, match='distillation token'):
        small(global_token='dist')(layers(prefix=1))
    # Table A5's patch row: local branch only, no ELM, average pooling -> mean of patch tokens.
    local = small(branches='local', fusion='y', pool='avg')
    assert n_params(local) == 0 and local.elm is None
    torch.testing.assert_close(local(feats), patch)
    assert small(branches='local').eval()(feats).shape == (2, 8)


@pytest.mark.slow
def test_fusion_options_flow_to_the_descriptor():
    feats = layers(k=2)
    for fusion in ('y', 'u', 'sum', 'hadamard', 'concat', 'fast_normalized', 'orthogonal'):
        neck = small(fusion=fusion)
        assert neck(feats).shape == (2, 16), fusion
        assert (neck.elm is None) == (fusion == 'y')
    # 'concat' pools [Y; U] and folds: GeM(Y) + GeM(U), not GeM(Y + U).
    neck = small(fusion='concat', branches='local', pool='avg').eval()
    y_map = torch.stack([g for _, g in feats]).mean(0)
    expected = y_map.mean(dim=(2, 3)) + neck.elm(y_map).mean(dim=(2, 3))
    torch.testing.assert_close(neck(feats), expected)
    folded = small(local_fold='linear')
    assert isinstance(folded.fold, nn.Linear) and folded.fold.in_features == 16
    assert folded(feats).shape == (2, 16)
    assert small(local_fold='linear', fusion='sum').fold is None
    concat = small(global_fusion='concat', fusion='y', pool='avg').eval()
    torch.testing.assert_close(
        concat(feats), torch.cat([torch.stack([g for _, g in feats]).mean(0).mean(dim=(2, 3)),
                                  torch.stack([p[:, 0] for p, _ in feats]).mean(0)], dim=1))


@pytest.mark.slow
def test_out_dim_projection():
    feats = layers(k=6, d=768, h=3, w=3)
    assert DToPNeck(out_dim=1536).proj is None
    for n in (128, 256, 512, 768, 1024, 2048):
        neck = DToPNeck(out_dim=n)
        assert isinstance(neck.proj, nn.Linear) and neck.proj.in_features == 1536
        assert neck(feats).shape == (2, n) and neck.out_dim == n
    # Table A5 head: an FC layer to N = 768 on the global branch alone.
    a5 = DToPNeck(branches='global', out_dim=768, project=True)
    assert a5.proj.in_features == 768 and a5(feats).shape == (2, 768)
    assert DToPNeck(branches='global', out_dim=768).proj is None
    with pytest.raises(ValueError, match='project=True needs out_dim'):
        DToPNeck(project=True)
    with pytest.raises(ValueError, match='out_dim=128 differs'):
        DToPNeck(out_dim=128, project=False)


def test_gradients_reach_every_parameter_and_layer():
    neck = small(aggregation='softmax', num_layers=3, fusion='fast_normalized').train()
    feats = tuple(ViTFeatures(f.prefix.requires_grad_(), f.grid.requires_grad_())
                  for f in layers(k=3))
    neck(feats).pow(2).sum().backward()
    for name, param in neck.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    for prefix, grid in feats:
        assert prefix.grad.abs().sum() > 0 and grid.grad.abs().sum() > 0


def test_input_and_option_errors():
    neck = small()
    with pytest.raises(ValueError, match='vision transformer'):
        neck((torch.randn(2, 8, 4, 4),))
    with pytest.raises(ValueError, match='in_channels'):
        neck(layers(d=6))
    with pytest.raises(ValueError, match='differs from layer 0'):
        neck(layers(k=1) + layers(k=1, h=3))
    with pytest.raises(ValueError, match='num_layers=2 but the backbone returned 3'):
        small(num_layers=2)(layers(k=3))
    with pytest.raises(ValueError, match='tuple'):
        neck(torch.randn(2, 8, 4, 4))
    for key, value in (('order', 'R3'), ('global_token', 'avg'), ('branches', 'none'),
                       ('pool', 'max'), ('local_fold', 'mean'), ('global_fusion', 'sum'),
                       ('aggregation', 'max')):
        with pytest.raises(ValueError, match=f'DToPNeck: {key}='):
            small(**{key: value})


class FusionWithoutWidth(nn.Module):
    def __init__(self, dim):
        super().__init__()

    def forward(self, y, u):
        return y + u


def test_elm_and_fusion_configs():
    neck = small(elm=dict(ELM, irb=False, waveblock=False), fusion='sum')
    assert neck.elm.reduce.in_channels == 8 and isinstance(neck.elm.irb, nn.Identity)
    assert neck.fusion.mode == 'sum' and neck.fusion.dim == 1
    tight = DToPNeck(in_channels=8, elm=ELM, fusion=dict(type='FeatureFusion', eps=1e-3))
    assert tight.fusion.eps == 1e-3 and tight.eps == 1e-6
    for key, value, message in (
            ('elm', 'EnhancedLocalityModule', "elm must be a config dict with a 'type'"),
            ('fusion', 'sum', "fusion must be a config dict with a 'type'"),
            ('elm', dict(type='NoSuchModule'), 'could not build elm='),
            ('fusion', dict(type='FeatureFusion', mode='max'), "could not build fusion=.*'max'"),
            ('elm', dict(ELM, in_channels=16), 'elm.in_channels=16 but the neck needs 8'),
            ('elm', None, "fuses Y with U = ELM"),
            ('fusion', dict(type=FusionWithoutWidth), 'no out_channels')):
        with pytest.raises(ValueError, match=message):
            DToPNeck(in_channels=8, **dict(dict(elm=ELM), **{key: value}))
    with pytest.raises(ValueError, match="mode 'y' ignores the ELM output; set elm=None"):
        small(fusion='y', elm=ELM)


def test_with_a_timm_backbone_from_config():
    torch.manual_seed(0)
    backbone = MODELS.build(dict(
        type='TimmBackbone', model_name='deit_tiny_distilled_patch16_224', img_size=32,
        patch_size=8, depth=3, embed_dim=16, num_heads=2, out_indices=(-3, -2, -1), norm=True))
    neck = MODELS.build(dict(type='DToPNeck', in_channels=16, elm=dict(ELM), num_layers=3,
                             global_token='dist'))
    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    out = neck(backbone(x))
    assert out.shape == (2, 32)
    out.sum().backward()
    assert x.grad.abs().sum() > 0
