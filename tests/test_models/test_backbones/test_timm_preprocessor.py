import pytest
import torch
from mmengine.registry import MODELS as MMENGINE_MODELS

from irtbox.models.backbones import TimmDataPreprocessor, timm_mean_std
from irtbox.registry import MODELS

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _scaled(values):
    return pytest.approx([255 * v for v in values])


def test_mean_std_from_the_pretrained_config():
    # R50+ViT-B hybrid checkpoints normalise with mean = std = 0.5
    assert timm_mean_std('vit_base_r50_s16_384') == ((127.5,) * 3, (127.5,) * 3)
    mean, std = timm_mean_std('deit_base_distilled_patch16_384')
    assert list(mean) == _scaled(IMAGENET_MEAN) and list(std) == _scaled(IMAGENET_STD)
    # a tag picks the weights: ViT-B/16 default (augreg) 0.5, MAE ImageNet statistics
    assert timm_mean_std('vit_base_patch16_224')[0] == (127.5,) * 3
    assert list(timm_mean_std('vit_base_patch16_224.mae')[0]) == _scaled(IMAGENET_MEAN)


def test_mean_std_errors():
    with pytest.raises(ValueError, match="unknown timm model_name='no_such_model'"):
        timm_mean_std('no_such_model')
    with pytest.raises(ValueError, match="model_name='deit_base_patch16_224.nope'"):
        timm_mean_std('deit_base_patch16_224.nope')


@pytest.mark.parametrize('registry, name', [(MODELS, 'TimmDataPreprocessor'),
                                            (MMENGINE_MODELS, 'irtbox.TimmDataPreprocessor')])
def test_preprocessor_normalises_with_the_backbone_statistics(registry, name):
    pre = registry.build(dict(type=name, model_name='vit_base_r50_s16_384'))
    assert isinstance(pre, TimmDataPreprocessor)
    imgs = [torch.randint(0, 256, (3, 8, 6), dtype=torch.uint8) for _ in range(2)]
    out = pre(dict(inputs=imgs), training=False)['inputs']
    expected = (torch.stack(imgs).float() - 127.5) / 127.5
    torch.testing.assert_close(out, expected)


def test_preprocessor_explicit_statistics_and_other_options():
    img = torch.randint(0, 256, (3, 4, 4), dtype=torch.uint8)
    pre = TimmDataPreprocessor('vit_base_r50_s16_384', mean=[10, 20, 30], std=[2, 4, 8],
                               bgr_to_rgb=True)
    out = pre(dict(inputs=[img]), training=False)['inputs'][0]
    mean = torch.tensor([10., 20., 30.]).view(3, 1, 1)
    std = torch.tensor([2., 4., 8.]).view(3, 1, 1)
    torch.testing.assert_close(out, (img.flip(0).float() - mean) / std)
    deit = TimmDataPreprocessor('deit_base_distilled_patch16_384')
    assert deit.mean.flatten().tolist() == _scaled(IMAGENET_MEAN)
    with pytest.raises(ValueError, match='give both mean and std'):
        TimmDataPreprocessor('vit_base_r50_s16_384', mean=[0, 0, 0])
