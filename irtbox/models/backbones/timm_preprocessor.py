"""Input normalisation taken from a timm model's own pretrained config."""
from typing import Optional, Sequence, Tuple

from mmengine.model import ImgDataPreprocessor

from irtbox.registry import MODELS

__all__ = ['timm_mean_std', 'TimmDataPreprocessor']


def timm_mean_std(model_name: str) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """Mean and std, on the 0-255 scale, that ``model_name``'s pretrained weights expect.

    Read from ``timm.get_pretrained_cfg`` (no download; every timm architecture has one). A tag
    picks the weights (``'vit_base_patch16_224.mae'``); without one, timm's default tag is used.
    E.g. the hybrid ``vit_base_r50_s16_384`` -> (127.5,) * 3 twice (mean = std = 0.5);
    ``deit_base_distilled_patch16_384`` -> ImageNet (123.675, 116.28, 103.53) / (58.395, 57.12,
    57.375).
    """
    import timm
    if not timm.is_model(model_name.split('.')[0]):
        raise ValueError(f'timm_mean_std: unknown timm model_name={model_name!r}; '
                         'see timm.list_models().')
    try:
        cfg = timm.get_pretrained_cfg(model_name)
    except RuntimeError as err:  # a tag the architecture does not have
        raise ValueError(f'timm_mean_std: model_name={model_name!r}: {err}') from err
    return tuple(255 * m for m in cfg.mean), tuple(255 * s for s in cfg.std)


@MODELS.register_module()
class TimmDataPreprocessor(ImgDataPreprocessor):
    """``ImgDataPreprocessor`` whose mean/std come from a timm model's pretrained config.

    Stacks the B images (3 x H x W, 0-255) into B x 3 x H x W and computes (x - mean) / std
    per channel with :func:`timm_mean_std`, so a config names the backbone once and cannot
    mismatch its normalisation. Give both ``mean`` and ``std`` (0-255) to override.

    Args:
        model_name: the timm name of the backbone (optionally ``name.tag``); in a
            retriever's config it may be left out: the retriever takes the backbone's
            (:func:`with_backbone_model_name`).
        mean, std: explicit per-channel statistics, 0-255; both or neither.
        **kwargs: the rest of ``ImgDataPreprocessor`` (``bgr_to_rgb``, ``pad_size_divisor``, ...).
    """

    def __init__(self,
                 model_name: str,
                 mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None,
                 **kwargs):
        if (mean is None) != (std is None):
            raise ValueError('TimmDataPreprocessor: give both mean and std, or neither '
                             f'(to read them from {model_name!r}).')
        if mean is None:
            mean, std = timm_mean_std(model_name)
        super().__init__(mean=mean, std=std, **kwargs)
        self.model_name = model_name


def with_backbone_model_name(preprocessor, backbone):
    """The ``preprocessor`` config with the ``backbone`` config's timm ``model_name`` when it
    is a ``TimmDataPreprocessor`` that names none, so that a config writes the name once, on
    the backbone (the retriever calls this). Anything else is returned as it is."""
    if not isinstance(preprocessor, dict) or preprocessor.get('model_name') is not None or \
            preprocessor.get('type') not in ('TimmDataPreprocessor', 'irtbox.TimmDataPreprocessor',
                                             TimmDataPreprocessor):
        return preprocessor
    name = backbone.get('model_name') if isinstance(backbone, dict) else None
    if name is None:
        raise ValueError('TimmDataPreprocessor: no model_name, and the backbone config names '
                         f'none to take it from (backbone={backbone!r})')
    return dict(preprocessor, model_name=name)
