import pytest
import torch
import torch.nn.functional as F

from irtbox.models.retrievers import ImageRetriever
from irtbox.structures import DataSample
from irtbox.apis import register_all_modules

register_all_modules()

BACKBONE = dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', img_size=32, patch_size=8,
                depth=1, embed_dim=16, num_heads=2)
HEAD = dict(type='EmbeddingHead',
            losses=dict(contrastive=dict(type='ContrastiveLoss', margin=0.5, memory_size=8,
                                         embed_dim=16)))


def build(**kwargs):
    torch.manual_seed(0)
    return ImageRetriever(backbone=BACKBONE, neck=[dict(type='ClsTokenPool')], **kwargs)


def samples(labels):
    return [DataSample().set_gt_label(label) for label in labels]


def test_tensor_and_predict_modes():
    model = build().eval()
    x = torch.randn(3, 3, 32, 32)
    emb = model(x, mode='tensor')
    assert emb.shape == (3, 16)
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(3))
    torch.testing.assert_close(emb, F.normalize(model.backbone(x)[-1].prefix[:, 0], dim=-1))
    out = model(x, samples([0, 1, 2]), mode='predict')
    torch.testing.assert_close(torch.stack([s.embedding for s in out]), emb)
    with pytest.raises(ValueError, match='invalid mode'):
        model(x, mode='nope')


def test_loss_mode_names_terms():
    model = build(head=HEAD).train()
    losses = model(torch.randn(4, 3, 32, 32), samples([0, 0, 1, 1]), mode='loss')
    assert set(losses) == {'loss_contrastive'} and losses['loss_contrastive'].requires_grad
    with pytest.raises(RuntimeError, match='needs a head'):
        build()(torch.randn(2, 3, 32, 32), samples([0, 1]), mode='loss')


def test_momentum_encoder_update_and_memory_keys():
    model = build(head=HEAD, momentum=0.9).train()
    online = dict(model.backbone.named_parameters())
    with torch.no_grad():
        for p in online.values():
            p.add_(0.1)  # the online weights move away from the momentum copy
    before = {k: v.clone() for k, v in model.momentum_encoder['backbone'].named_parameters()}
    x = torch.randn(4, 3, 32, 32)
    model(x, samples([0, 0, 1, 1]), mode='loss')
    for key, value in model.momentum_encoder['backbone'].named_parameters():
        torch.testing.assert_close(value, 0.9 * before[key] + 0.1 * online[key])
        assert not value.requires_grad
    # The memory holds the momentum encoder's embeddings, not the online ones.
    keys = F.normalize(model.momentum_encoder['neck'](model.momentum_encoder['backbone'](x)), dim=-1)
    memory = model.head.losses['contrastive'].memory
    torch.testing.assert_close(memory.embeddings[:4], keys)
    with pytest.raises(ValueError, match='momentum'):
        build(momentum=1.0)


def test_multi_scale_descriptor():
    torch.manual_seed(1)
    model = ImageRetriever(
        backbone=dict(BACKBONE, dynamic_img_size=True), neck=[dict(type='GeMPool', p=3)],
        test_scales=(1.0, 0.5), multi_scale_power=3.0).eval()
    x = torch.randn(2, 3, 32, 32)
    single = [F.normalize(model.neck(model.backbone(s)), dim=-1)
              for s in (x, F.interpolate(x, scale_factor=0.5, mode='bilinear', align_corners=False))]
    expected = F.normalize(((single[0] ** 3 + single[1] ** 3) / 2).pow(1 / 3), dim=-1)
    torch.testing.assert_close(model(x, mode='tensor'), expected)


def test_multi_scale_sgem():
    """multi_scale='sgem': SuperGlobal's Scale-GeM of the per-scale descriptors (its default:
    their element-wise max), then L2; a dict sets its p."""
    torch.manual_seed(1)
    kwargs = dict(backbone=dict(BACKBONE, dynamic_img_size=True), neck=[dict(type='GeMPool')],
                  test_scales=(1.0, 0.5))
    model = ImageRetriever(multi_scale='sgem', **kwargs).eval()
    x = torch.randn(2, 3, 32, 32)
    single = [F.normalize(model.neck(model.backbone(s)), dim=-1)
              for s in (x, F.interpolate(x, scale_factor=0.5, mode='bilinear', align_corners=False))]
    torch.testing.assert_close(model(x, mode='tensor'),
                               F.normalize(torch.maximum(single[0], single[1]), dim=-1))
    powered = ImageRetriever(multi_scale=dict(type='Sgem', p=3, infinity=False), **kwargs).eval()
    powered.load_state_dict(model.state_dict())
    low = torch.minimum(single[0], single[1]).amin(1, keepdim=True)
    expected = (((single[0] - low) ** 3 + (single[1] - low) ** 3) / 2) ** (1 / 3) + low
    torch.testing.assert_close(powered(x, mode='tensor'), F.normalize(expected, dim=-1))
    with pytest.raises(ValueError, match="multi_scale must be 'mean', 'sgem' or a dict"):
        ImageRetriever(multi_scale='max', **kwargs)


def test_multi_scale_power_needs_non_negative_descriptors():
    model = ImageRetriever(backbone=dict(BACKBONE, dynamic_img_size=True), neck=[dict(type='AvgPool')],
                           test_scales=(1.0, 0.5), multi_scale_power=3.0).eval()
    with pytest.raises(ValueError, match='non-negative'):
        model(torch.randn(2, 3, 32, 32), mode='tensor')


def test_multi_scale_power_from_gem():
    torch.manual_seed(1)
    kwargs = dict(backbone=dict(BACKBONE, dynamic_img_size=True), neck=[dict(type='GeMPool', p=2.5)],
                  test_scales=(1.0, 0.5))
    learned = ImageRetriever(multi_scale_power='gem', **kwargs).eval()
    fixed = ImageRetriever(multi_scale_power=2.5, **kwargs).eval()
    fixed.load_state_dict(learned.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(learned(x, mode='tensor'), fixed(x, mode='tensor'))
    with pytest.raises(ValueError, match='needs a GeMPool'):
        ImageRetriever(backbone=BACKBONE, neck=[dict(type='ClsTokenPool')], multi_scale_power='gem')


def test_query_scales_differ_from_database_scales():
    torch.manual_seed(2)
    kwargs = dict(backbone=dict(BACKBONE, dynamic_img_size=True), neck=[dict(type='ClsTokenPool')])
    mixed = ImageRetriever(test_scales=(1.0, 0.5), query_test_scales=(1.0,), **kwargs).eval()
    x = torch.randn(3, 3, 32, 32)
    data = [DataSample(metainfo=dict(is_query=q)) for q in (True, False, True)]
    out = torch.stack([s.embedding for s in mixed(x, data, mode='predict')])
    single = mixed.extract_raw_feat(x, (1.0,))
    multi = mixed.extract_raw_feat(x, (1.0, 0.5))
    torch.testing.assert_close(out[[0, 2]], single[[0, 2]])
    torch.testing.assert_close(out[1], multi[1])
    assert not torch.allclose(single[1], multi[1])


def test_each_sample_embedded_once_at_its_own_scales():
    kwargs = dict(backbone=dict(BACKBONE, dynamic_img_size=True), neck=[dict(type='ClsTokenPool')])
    model = ImageRetriever(test_scales=(1.0, 0.5), query_test_scales=(1.0,), **kwargs).eval()
    batch_sizes = []
    model.backbone.register_forward_hook(lambda mod, args, out: batch_sizes.append(len(args[0])))
    data = [DataSample(metainfo=dict(is_query=q)) for q in (True, False, True)]
    model(torch.randn(3, 3, 32, 32), data, mode='predict')
    # queries: 2 images at one scale; database: 1 image at two scales
    assert sorted(batch_sizes) == [1, 1, 2]


def test_gem_power_comes_from_the_neck():
    neck = dict(type='DToPNeck', in_channels=16, elm=dict(type='EnhancedLocalityModule',
                                                          channels=4), gem_p=2.5)
    model = ImageRetriever(backbone=dict(BACKBONE, dynamic_img_size=True, norm='all'), neck=[neck],
                           test_scales=(1.0, 0.5), multi_scale_power='gem')
    assert float(model._gem_power()) == 2.5
    with pytest.raises(ValueError, match='needs a GeMPool'):
        ImageRetriever(backbone=BACKBONE, neck=[dict(neck, pool='avg')], multi_scale_power='gem')


class _Copies(torch.overrides.TorchFunctionMode):
    """The ``non_blocking`` of every ``Tensor.to`` inside it."""

    def __init__(self):
        super().__init__()
        self.non_blocking = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            self.non_blocking.append(kwargs.get('non_blocking', False))
        return func(*args, **kwargs)


@pytest.mark.parametrize('preprocessor, expected', [
    (None, True), (dict(type='ImgDataPreprocessor', mean=[0.5] * 3, std=[0.5] * 3), True),
    (dict(type='ImgDataPreprocessor', non_blocking=False), False)])
def test_batches_go_to_the_device_without_blocking(preprocessor, expected):
    """Issue 47 item 10: the data preprocessor's host-to-device copies of a batch (pinned by
    the runner's and the extraction's loaders on a GPU) do not wait; a config's own
    ``non_blocking`` wins. On the CPU the copy is no copy: nothing changes."""
    model = build(data_preprocessor=preprocessor)
    batch = dict(inputs=[torch.randint(0, 255, (3, 32, 32), dtype=torch.uint8)],
                 data_samples=samples([0]))
    with _Copies() as copies:
        model.data_preprocessor(batch, True)
    assert copies.non_blocking and set(copies.non_blocking) == {expected}


def test_bf16_inference_runs_the_network_under_autocast_on_a_gpu_only(monkeypatch):
    """Issue 47 item 10: with ``bf16_inference`` (set from the config by ``init_model`` and
    the runner) an eval-mode forward on a GPU runs the backbone and necks under bf16 autocast
    and gives float32 descriptors; on a CPU, and in training (the optimizer wrapper's own
    autocast), nothing changes."""
    from tests.gpu_semantics import DeviceTensor
    model = build(head=HEAD).eval()
    assert model.bf16_inference is False
    x = torch.randn(2, 3, 32, 32)
    plain = model(x, mode='tensor')
    model.bf16_inference = True
    assert torch.equal(model(x, mode='tensor'), plain)  # the CPU: bit for bit
    entered = []
    real = torch.autocast

    def recording(device_type, dtype=None, **kwargs):
        entered.append((device_type, dtype))
        return real('cpu', dtype=dtype, **kwargs)  # the CPU's bf16, where CUDA's is not
    monkeypatch.setattr(torch, 'autocast', recording)
    out = model(x.as_subclass(DeviceTensor), mode='tensor')
    assert entered == [('cuda', torch.bfloat16)]
    assert out.dtype == torch.float32 and not torch.equal(out, plain)
    entered.clear()
    model.train()
    model(x.as_subclass(DeviceTensor), samples([0, 1]), mode='loss')
    assert ('cuda', torch.bfloat16) not in entered  # (the losses leave autocast themselves)
