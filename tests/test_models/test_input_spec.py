"""The input spec: sizes measured from the test pipeline whatever resizes it, channel orders and
normalisation from the data preprocessor, test scales from the retriever."""
import os.path as osp
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmcv.transforms import LoadImageFromFile
from mmengine.config import Config
from mmengine.model import ImgDataPreprocessor

from irtbox.apis import init_model
from irtbox.models.backbones import TimmDataPreprocessor
from irtbox.models.input_spec import InputSpec, input_spec_of, resolve_input_spec
from irtbox.registry import MODELS, TRANSFORMS
from irtbox.utils.config import load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
PLAIN = SimpleNamespace(data_preprocessor=ImgDataPreprocessor())


def pipeline_cfg(*pipeline):
    return Config(dict(test_dataloader=dict(dataset=dict(pipeline=list(pipeline)))))


def spec_of(*pipeline, preprocessor=None) -> InputSpec:
    model = SimpleNamespace(data_preprocessor=preprocessor) if preprocessor else PLAIN
    return resolve_input_spec(model, pipeline_cfg(*pipeline))


@pytest.mark.parametrize('config, size, varies', [
    ('configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py', (32, 32), 'never'),  # 32 x 32
    ('configs/irt/irt-r_deit-s_1xb64-35k_sop.py', (224, 224), 'never'),   # 256, then crop 224
    ('configs/dtop/dtop_r50-vit-b_8xb8-30e_sfm120k.py', (512, 512), 'aspect'),  # keep_ratio 512
    ('configs/dml_benchmark/dml_dinov2-vit-b_arcface_1xb256-39k_cub.py', (224, 224),
     'never'),  # a wrapped dataset
])
def test_shipped_configs(config, size, varies):
    spec = resolve_input_spec(PLAIN, load_config(osp.join(ROOT, config)))
    assert (spec.size, spec.size_varies) == (size, varies)


def test_sizes_are_h_w_of_what_the_pipeline_gives():
    assert spec_of(dict(type='Resize', scale=(64, 48))).size == (48, 64)  # mmcv: (w, h)
    assert spec_of(dict(type='Resize', scale=(64, 48)),
                   dict(type='CenterCrop', crop_size=(40, 30))).size == (30, 40)
    packed = spec_of(dict(type='LoadImageFromFile'), dict(type='Resize', scale=(64, 48)),
                     dict(type='PackRetrievalInputs'))
    assert (packed.size, packed.size_varies) == ((48, 64), 'never')


def test_any_resize():
    """By the short edge (mmcv: a long edge of at most 1000), by a scale factor, or none."""
    short = spec_of(dict(type='Resize', scale=(1000, 48), keep_ratio=True))
    assert (short.size, short.size_varies) == ((48, 48), 'aspect')
    factor = spec_of(dict(type='Resize', scale_factor=0.5))
    assert (factor.size, factor.size_varies) == ((112, 112), 'image')  # REFERENCE_SIDE / 2
    none = spec_of(dict(type='LoadImageFromFile'))
    assert (none.size, none.size_varies) == ((224, 224), 'image')
    assert spec_of().size_varies == 'image'  # a config without a test pipeline


def test_a_failing_pipeline_is_named():
    with pytest.raises(ValueError, match=r'test pipeline: Resize\(scale=\[1, 2, 3\].*fails on '
                                         r'a 224 x 224 image'):
        spec_of(dict(type='Resize', scale=[1, 2, 3]))


@pytest.mark.parametrize('kwargs, network_order', [
    (dict(bgr_to_rgb=True), 'rgb'),
    (dict(rgb_to_bgr=True), 'rgb'),
    (dict(), 'bgr'),
    (dict(bgr_to_rgb=True, pad_size_divisor=32), 'rgb'),
    (dict(mean=None, std=None, bgr_to_rgb=True), 'rgb'),
])
def test_channel_order_and_normalisation(kwargs, network_order):
    preprocessor = ImgDataPreprocessor(**dict(dict(mean=[10, 20, 30], std=[2, 3, 4]), **kwargs))
    spec = spec_of(dict(type='LoadImageFromFile'), preprocessor=preprocessor)
    assert (spec.pixel_order, spec.network_order) == ('bgr', network_order)
    assert spec.preprocessor_flips == (network_order == 'rgb')
    normalised = 'mean' not in kwargs
    assert (spec.mean, spec.std) == (((10.0, 20.0, 30.0), (2.0, 3.0, 4.0)) if normalised
                                     else ((), ()))


def test_mean_std_are_the_float32_values_the_network_gets():
    spec = spec_of(preprocessor=TimmDataPreprocessor('deit_small_patch16_224'))
    assert spec.mean == tuple(torch.tensor([123.675, 116.28, 103.53]).tolist())
    assert spec.mean != (123.675, 116.28, 103.53)  # float32, as the buffers


class _RGBLoader(LoadImageFromFile):
    """A loader that decodes RGB and says so, as mmcv 1's did."""
    channel_order = 'rgb'


def test_arrays_enter_in_the_loaders_channel_order():
    TRANSFORMS.register_module(name='_TestRGBLoader', module=_RGBLoader, force=True)
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    bgr_spec = spec_of(dict(type='LoadImageFromFile'))
    rgb_spec = spec_of(dict(type='_TestRGBLoader'),
                       preprocessor=ImgDataPreprocessor(rgb_to_bgr=True))
    assert (rgb_spec.pixel_order, rgb_spec.network_order) == ('rgb', 'bgr')
    loaded = bgr_spec.as_loaded(rgb, 7)
    np.testing.assert_array_equal(loaded['img'], rgb[..., ::-1])
    assert loaded['img'].flags.c_contiguous and loaded['img_shape'] == (2, 3)
    assert loaded['sample_idx'] == 7
    np.testing.assert_array_equal(rgb_spec.as_loaded(rgb)['img'], rgb)


def test_transforms_for_arrays_leave_out_the_loader():
    spec = spec_of(dict(type='LoadImageFromFile'), dict(type='Resize', scale=(8, 8)),
                   dict(type='PackRetrievalInputs'))
    assert len(spec.transforms().transforms) == 3
    packed = spec.transforms(arrays=True)(spec.as_loaded(np.zeros((5, 9, 3), np.uint8)))
    assert packed['inputs'].shape == (3, 8, 8)
    with pytest.raises(ValueError, match='no file loader'):
        spec_of(dict(type='Resize', scale=(8, 8))).transforms(arrays=True)


def test_init_model_resolves_it_and_the_retriever_keeps_its_scales_current():
    model = init_model(TINY)
    assert model.input_spec == InputSpec(
        pipeline=(dict(type='LoadImageFromFile'),
                  dict(type='Resize', scale=(32, 32), keep_ratio=False),
                  dict(type='PackRetrievalInputs')),
        size=(32, 32), size_varies='never', mean=(127.5,) * 3, std=(127.5,) * 3,
        pixel_order='bgr', network_order='rgb', test_scales=(1.0,), query_test_scales=None)
    model.test_scales, model.query_test_scales = (1.0, 0.5), (1.0,)
    assert (model.input_spec.test_scales, model.input_spec.query_test_scales) == (
        (1.0, 0.5), (1.0,))
    built = MODELS.build(load_config(TINY).model)
    assert built.input_spec is None
    with pytest.raises(ValueError, match=r'export: the model \(ImageRetriever\) has no config'):
        input_spec_of(built, 'export')
