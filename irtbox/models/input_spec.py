"""What a model takes as input, resolved once from its data preprocessor and test pipeline.

``init_model`` stores it on the model as ``model.input_spec`` (an :class:`InputSpec`);
extraction, export, the index identity and publishing read it there, and nothing else reads
the test pipeline. Like timm's ``model.pretrained_cfg`` (input size, mean, std) it travels
with the model; unlike a declared config, its sizes and channel orders are measured: the test
pipeline runs on probe images and the preprocessor on one pixel. So any resize (fixed,
keep-ratio, by the short edge, by a scale factor, a transform of your own) and any
preprocessor give a true spec, without this module knowing their types or private fields.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch

from irtbox.registry import TRANSFORMS

__all__ = ['REFERENCE_SIDE', 'InputSpec', 'config_pipelines', 'config_test_pipeline',
           'fixed_input_size', 'resolve_input_spec', 'input_spec_of']

# The side of the square image whose network input is InputSpec.size (timm's default input
# size); only pipelines whose output follows the image's size depend on it.
REFERENCE_SIDE = 224
# (H, W) probe images: the reference square, a larger square, a wide image.
_PROBES = ((REFERENCE_SIDE, REFERENCE_SIDE), (320, 320), (REFERENCE_SIDE, 320))


@dataclass(frozen=True)
class InputSpec:
    """How images reach the network; read-only, ``dataclasses.asdict`` gives it as JSON-ready
    data (the export report holds it).

    Attributes:
        pipeline: the test pipeline's transform configs, file loader included; build them
            with :meth:`transforms`. The identity of an index hashes them.
        size: (H, W) of the network input for a square image; where the size follows the
            image's own, that of a ``REFERENCE_SIDE`` square.
        size_varies: ``'never'``: every image gets ``size`` (a crop, or a resize that
            ignores the aspect ratio); ``'aspect'``: squares get ``size`` and other images
            keep their aspect ratio (a keep-ratio or short-edge resize); ``'image'``: the
            size follows the image's (a scale factor, or no resize).
        mean, std: per-channel normalisation of the 0-255 input, in the network's channel
            order (empty: none).
        pixel_order: ``'bgr'`` or ``'rgb'``: the channels of the pipeline's images, as its
            file loader decodes them (mmcv's BGR where it has none).
        network_order: the channel order the network sees, after the data preprocessor.
        test_scales, query_test_scales: the retriever's multi-scale test (``None``: queries
            at ``test_scales`` too).
    """
    pipeline: Tuple[dict, ...]
    size: Tuple[int, int]
    size_varies: str
    mean: Tuple[float, ...]
    std: Tuple[float, ...]
    pixel_order: str
    network_order: str
    test_scales: Tuple[float, ...] = (1.0,)
    query_test_scales: Optional[Tuple[float, ...]] = None

    @property
    def preprocessor_flips(self) -> bool:
        """Whether the data preprocessor reverses the channels (``bgr_to_rgb``)."""
        return self.pixel_order != self.network_order

    def transforms(self, arrays: bool = False):
        """The pipeline built (a ``Compose``). ``arrays``: without its file loader, for
        images decoded already (see :meth:`as_loaded`); ValueError when it has none."""
        from mmengine.dataset import Compose
        built = _build(self.pipeline)
        if arrays:
            if not any(_is_file_loader(t) for t in built):
                raise ValueError('the test pipeline has no file loader (LoadImageFromFile) '
                                 'for decoded images to replace: '
                                 f'{[t.get("type") for t in self.pipeline]}')
            built = [t for t in built if not _is_file_loader(t)]
        return Compose(built)

    def as_loaded(self, rgb: np.ndarray, sample_idx: int = 0) -> dict:
        """The results the file loader would give for the H x W x 3 RGB image ``rgb`` (as
        PIL decodes it): the input of ``transforms(arrays=True)``."""
        return _loaded(rgb[..., ::-1] if self.pixel_order == 'bgr' else rgb, sample_idx)


def _loaded(img: np.ndarray, sample_idx: int = 0) -> dict:
    img = np.ascontiguousarray(img)
    return dict(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2], sample_idx=sample_idx)


def _build(pipeline) -> list:
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope('irtbox'):
        return [TRANSFORMS.build(t) for t in pipeline]


def _is_file_loader(transform) -> bool:
    # irtbox's loader subclasses mmcv's: one class check covers both.
    from mmcv.transforms import LoadImageFromFile
    return isinstance(transform, LoadImageFromFile)


def config_test_pipeline(cfg) -> List[dict]:
    """The transforms of the config's (first) test dataset, through dataset wrappers; empty
    when it has none."""
    return next(iter(config_pipelines(cfg, 'test_dataloader')), [])


def config_pipelines(cfg, loader: str) -> List[List[dict]]:
    """The transforms of each dataset of the config's ``loader`` (``'train_dataloader'``, a
    list of loaders for a multi-dataset loop, ...), through dataset wrappers; a dataset
    without a pipeline is left out."""
    loaders = cfg.get(loader) or []
    pipelines = []
    for entry in loaders if isinstance(loaders, (list, tuple)) else [loaders]:
        dataset = (entry or {}).get('dataset') or {}
        while 'pipeline' not in dataset and isinstance(dataset.get('dataset'), dict):
            dataset = dataset['dataset']
        if dataset.get('pipeline'):
            pipelines.append(list(dataset['pipeline']))
    return pipelines


def _output_size(transforms: list, shape: Tuple[int, int], where: str) -> Tuple[int, int]:
    """(H, W) of what the transforms make of a decoded ``shape`` image: its packed
    ``inputs`` (C x H x W), or ``img`` for a pipeline that does not pack."""
    results = _loaded(np.zeros((*shape, 3), np.uint8))
    for transform in transforms:  # one at a time, to name the one that fails
        try:
            results = transform(results)
        except Exception as err:  # noqa: BLE001  (re-raised naming the transform)
            raise ValueError(f'{where}: {transform!r} fails on a {shape[0]} x {shape[1]} '
                             f'image ({type(err).__name__}: {err})') from err
        if results is None:
            raise ValueError(f'{where}: {transform!r} drops a {shape[0]} x {shape[1]} image')
    if 'inputs' in results:
        return tuple(int(s) for s in results['inputs'].shape[-2:])
    return tuple(int(s) for s in results['img'].shape[:2])


def _stats(preprocessor, name: str) -> Tuple[float, ...]:
    # The buffers' own (float32) values: what the network is normalised with.
    values = getattr(preprocessor, name, None)
    return tuple(values.flatten().tolist()) if isinstance(values, torch.Tensor) else ()


def _flips_channels(preprocessor, mean, std) -> bool:
    """Whether ``preprocessor`` reverses the channel order, asked of it on one pixel whose
    channels differ (MMEngine keeps ``bgr_to_rgb`` only in a private attribute, and a
    preprocessor of one's own may do anything)."""
    pixel = torch.tensor([0, 100, 200], dtype=torch.uint8).view(3, 1, 1)
    with torch.no_grad():
        out = preprocessor(dict(inputs=[pixel]), False)['inputs'][0]
    out = out[:, 0, 0].float().cpu()  # the top-left pixel: padding goes right and down

    def normalised(x):
        return (x.float() - torch.tensor(mean or (0.0,))) / torch.tensor(std or (1.0,))
    values = pixel.flatten()
    return bool((out - normalised(values.flip(0))).abs().sum() <
                (out - normalised(values)).abs().sum())


def _measure(built: list, where: str) -> Tuple[Tuple[int, int], str]:
    """(size, size_varies) of :class:`InputSpec`: the sizes the transforms after the file
    loader give the probe images."""
    size, larger, wide = (_output_size([t for t in built if not _is_file_loader(t)], shape,
                                       where) for shape in _PROBES)
    return size, 'never' if size == larger == wide else 'aspect' if size == larger else 'image'


def fixed_input_size(cfg) -> Optional[Tuple[int, int]]:
    """The one (H, W) every image of the config's training, validation and test pipelines
    becomes, or None: sizes that vary, no training pipeline, or a pipeline the probe images
    cannot pass (e.g. one that expects tuples)."""
    sizes = set()
    pipelines = {loader: config_pipelines(cfg, loader)
                 for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader')}
    if not pipelines['train_dataloader']:
        return None
    for loader, each in pipelines.items():
        for pipeline in each:
            try:
                size, varies = _measure(_build(pipeline), loader)
            except Exception:  # noqa: BLE001 (a speed setting; the run reports a bad pipeline)
                return None  # e.g. one of tuples, which the probe images do not fit
            if varies != 'never':
                return None
            sizes.add(size)
    return sizes.pop() if len(sizes) == 1 else None


def resolve_input_spec(model: torch.nn.Module, cfg) -> InputSpec:
    """The :class:`InputSpec` of ``model`` (its ``data_preprocessor``, its test scales) fed by
    the test pipeline of ``cfg``. ValueError naming the transform when the pipeline fails on
    a probe image."""
    from mmengine.config import ConfigDict
    where = f'{getattr(cfg, "filename", None) or "config"}: test pipeline'
    pipeline = tuple(ConfigDict(t).to_dict() for t in config_test_pipeline(cfg))
    built = _build(pipeline)
    loaders = [t for t in built if _is_file_loader(t)]
    size, varies = _measure(built, where)
    # mmcv 2's loaders always decode BGR (it has no channel option); a loader that decodes
    # otherwise says so in a channel_order attribute, as mmcv 1's did.
    pixel_order = getattr(loaders[0], 'channel_order', 'bgr') if loaders else 'bgr'
    preprocessor = model.data_preprocessor
    mean, std = _stats(preprocessor, 'mean'), _stats(preprocessor, 'std')
    flipped = {'bgr': 'rgb', 'rgb': 'bgr'}[pixel_order]
    query = getattr(model, 'query_test_scales', None)
    return InputSpec(
        pipeline=pipeline, size=size, size_varies=varies, mean=mean, std=std,
        pixel_order=pixel_order,
        network_order=flipped if _flips_channels(preprocessor, mean, std) else pixel_order,
        test_scales=tuple(getattr(model, 'test_scales', (1.0,))),
        query_test_scales=None if query is None else tuple(query))


def input_spec_of(model: torch.nn.Module, caller: str) -> InputSpec:
    """``model.input_spec``, or a ValueError saying how to build a model that has one."""
    spec = getattr(model, 'input_spec', None)
    if spec is None:
        raise ValueError(f'{caller}: the model ({type(model).__name__}) has no config, so no '
                         'input spec (model.input_spec); build it with irtbox.apis.init_model '
                         'or get_model')
    return spec
