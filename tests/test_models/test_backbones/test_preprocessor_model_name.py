"""A retriever config names its timm model once, on the backbone: a TimmDataPreprocessor
without model_name takes the backbone's."""
import pytest
from mmengine.registry import DefaultScope

from irtbox.models.backbones.timm_preprocessor import (TimmDataPreprocessor, timm_mean_std,
                                                        with_backbone_model_name)
from irtbox.registry import MODELS

BACKBONE = dict(type='TimmBackbone', model_name='vit_tiny_patch16_224', pretrained=False,
                img_size=32, patch_size=4, depth=1)


def test_the_retriever_gives_the_backbone_name():
    with DefaultScope.overwrite_default_scope('irtbox'):  # as the runner builds it
        model = MODELS.build(dict(type='ImageRetriever', backbone=BACKBONE,
                                  data_preprocessor=dict(type='TimmDataPreprocessor')))
    assert isinstance(model.data_preprocessor, TimmDataPreprocessor)
    assert model.data_preprocessor.model_name == 'vit_tiny_patch16_224'
    mean, std = timm_mean_std('vit_tiny_patch16_224')
    assert model.data_preprocessor.mean.flatten().tolist() == pytest.approx(mean)
    assert model.data_preprocessor.std.flatten().tolist() == pytest.approx(std)


def test_an_explicit_name_and_other_preprocessors_are_kept():
    given = dict(type='TimmDataPreprocessor', model_name='deit_small_patch16_224')
    assert with_backbone_model_name(given, BACKBONE) == given
    plain = dict(type='ImgDataPreprocessor', mean=[0] * 3, std=[1] * 3)
    assert with_backbone_model_name(plain, BACKBONE) is plain


def test_no_name_anywhere_is_refused():
    with pytest.raises(ValueError, match='TimmDataPreprocessor: no model_name'):
        with_backbone_model_name(dict(type='TimmDataPreprocessor'), dict(type='Other'))
