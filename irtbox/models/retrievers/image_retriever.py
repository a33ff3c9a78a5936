"""The retriever: data preprocessor -> backbone -> neck(s) -> L2 -> head (losses)."""
import copy
import dataclasses
from typing import Dict, List, Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModel

from irtbox.registry import MODELS
from irtbox.structures import DataSample
from ..backbones.timm_preprocessor import with_backbone_model_name
from ..input_spec import InputSpec

__all__ = ['ImageRetriever']


@MODELS.register_module()
class ImageRetriever(BaseModel):
    """Maps images to L2-normalised global descriptors and trains them with a head.

    ``forward(inputs B x 3 x H x W, data_samples, mode)``:

    - ``'tensor'``: B x D L2-normalised embeddings;
    - ``'loss'``: the head's dict of named loss terms (``loss_contrastive``, ...);
    - ``'predict'``: the data samples, each with its ``embedding`` (D) set.

    Args:
        neck: one neck config or a list applied in order.
        head: the head that owns the losses; optional for test-only models.
        data_preprocessor: default ``ImgDataPreprocessor``; ``non_blocking=True`` unless it says
            otherwise (a batch's copy to the GPU does not wait).
        normalize: L2-normalise the final descriptor (IRT: projection on the unit ball).
        momentum: m (e.g. 0.999, IRT on In-Shop): a momentum copy of backbone and neck (MoCo,
            He et al. 2020), ``θ_k ← m θ_k + (1 − m) θ`` before every step, whose batch
            embeddings go to the head as ``memory_embeddings`` (cross-batch memory).
        whitening: optional projection (e.g. ``LearnedWhitening``) in eval mode after
            multi-scale aggregation and L2, then L2 again; predict mode keeps the descriptor
            before it as ``embedding_raw``.
        test_scales: test-time scales, L2 of ``(mean_s f(x_s)^p)^(1/p)`` (docs/protocols.md,
            "Multi-scale descriptors"); ``multi_scale_power='gem'`` takes p from the first neck
            with a ``gem_power``.
        query_test_scales: scales of the ``is_query`` samples when they differ from the
            database's (DToP Table A11); default ``test_scales``.
        multi_scale: how the scales' descriptors combine: ``'mean'`` (the power mean of
            ``multi_scale_power``), ``'sgem'`` (SuperGlobal's Scale-GeM with its defaults, the
            element-wise max: :class:`~irtbox.models.necks.Sgem`) or a module's dict taking
            the list of descriptors, e.g. ``dict(type='Sgem', p=10, infinity=False)``; then L2.

    ``input_spec`` (:class:`~irtbox.models.input_spec.InputSpec`): what the retriever takes,
    set by ``init_model`` from the config's test pipeline; None otherwise.
    ``bf16_inference`` (default False): in eval mode on a GPU, the backbone and necks run under
    bf16 autocast and the descriptors come out in float32; ``init_model`` and the runner set it
    from the config (``irtbox.engine.bf16_inference``). A CPU forward never changes.
    """

    def __init__(self,
                 backbone: dict,
                 neck: Union[dict, Sequence[dict], None] = None,
                 head: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 normalize: bool = True,
                 momentum: Optional[float] = None,
                 whitening: Optional[dict] = None,
                 test_scales: Sequence[float] = (1.0,),
                 query_test_scales: Optional[Sequence[float]] = None,
                 multi_scale_power: Union[float, str] = 1.0,
                 multi_scale: Union[str, dict] = 'mean',
                 init_cfg=None):
        if data_preprocessor is None:
            data_preprocessor = dict(type='ImgDataPreprocessor')
        if isinstance(data_preprocessor, dict):
            # On a GPU batches come pinned (the runner's and the extraction's loaders), so
            # their copies need not wait; on a CPU there is no copy.
            data_preprocessor = {'non_blocking': True, **data_preprocessor}
        data_preprocessor = with_backbone_model_name(data_preprocessor, backbone)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        necks = [] if neck is None else neck if isinstance(neck, (list, tuple)) else [neck]
        self.neck = nn.Sequential(*[MODELS.build(cfg) for cfg in necks])
        self.head = MODELS.build(head) if head is not None else None
        self.whitening = MODELS.build(whitening) if whitening is not None else None
        self.normalize = normalize
        self.test_scales = tuple(test_scales)
        self.query_test_scales = None if query_test_scales is None else tuple(query_test_scales)
        self._input_spec = None  # init_model sets it (see input_spec)
        self.bf16_inference = False  # init_model and the runner set it from the config
        if multi_scale_power == 'gem' and self._gem_power() is None:
            raise ValueError("ImageRetriever: multi_scale_power='gem' needs a GeMPool neck (or "
                             "another neck with a gem_power, e.g. DToPNeck with pool='gem')")
        if not isinstance(multi_scale_power, (int, float)) and multi_scale_power != 'gem':
            raise ValueError("ImageRetriever: multi_scale_power must be a number or 'gem', got "
                             f'{multi_scale_power!r}')
        self.multi_scale_power = multi_scale_power
        if multi_scale != 'mean' and multi_scale != 'sgem' and not isinstance(multi_scale, dict):
            raise ValueError("ImageRetriever: multi_scale must be 'mean', 'sgem' or a dict of a "
                             f"module (e.g. dict(type='Sgem', p=10)), got {multi_scale!r}")
        self.multi_scale_pool = None if multi_scale == 'mean' else MODELS.build(
            dict(type='Sgem') if multi_scale == 'sgem' else multi_scale)
        if momentum is not None and not 0.0 <= momentum < 1.0:
            raise ValueError(f'ImageRetriever: momentum must be in [0, 1), got {momentum}')
        self.momentum = momentum
        self.momentum_encoder = None
        if momentum is not None:
            self.momentum_encoder = nn.ModuleDict(
                dict(backbone=copy.deepcopy(self.backbone), neck=copy.deepcopy(self.neck)))
            self.momentum_encoder.requires_grad_(False)

    @property
    def input_spec(self) -> Optional[InputSpec]:
        """The spec set by ``init_model``, with the test scales the retriever has now: they
        are its own state, which the training hooks change for a while."""
        if self._input_spec is None:
            return None
        return dataclasses.replace(self._input_spec, test_scales=self.test_scales,
                                   query_test_scales=self.query_test_scales)

    @input_spec.setter
    def input_spec(self, spec: Optional[InputSpec]) -> None:
        self._input_spec = spec

    def init_weights(self) -> None:
        """MMEngine's initialisation of the parts, then the momentum encoder made a copy of
        the initialised online encoder again, so both start from the same weights."""
        super().init_weights()
        if self.momentum_encoder is not None:
            self.momentum_encoder['backbone'].load_state_dict(self.backbone.state_dict())
            self.momentum_encoder['neck'].load_state_dict(self.neck.state_dict())

    def _gem_power(self) -> Optional[torch.Tensor]:
        """The GeM exponent of the first neck that pools with one (its ``gem_power``)."""
        return next((neck.gem_power for neck in self.neck
                     if getattr(neck, 'gem_power', None) is not None), None)

    def _embed(self, inputs: torch.Tensor, backbone, neck) -> torch.Tensor:
        if self.training or not (self.bf16_inference and inputs.is_cuda):
            x = neck(backbone(inputs))  # training: under the optimizer wrapper's autocast
        else:
            with torch.autocast('cuda', dtype=torch.bfloat16):
                x = neck(backbone(inputs))
            x = x.float()  # L2, multi-scale and whitening in float32
        return F.normalize(x, dim=-1) if self.normalize else x

    def extract_feat(self, inputs: torch.Tensor) -> torch.Tensor:
        """B x D descriptors: multi-scale and whitened in eval mode when configured."""
        return self._whiten(self.extract_raw_feat(inputs))

    def _whiten(self, desc: torch.Tensor) -> torch.Tensor:
        if self.whitening is None or self.training:
            return desc
        return F.normalize(self.whitening(desc), dim=-1)

    def extract_raw_feat(self, inputs: torch.Tensor, scales: Optional[Sequence[float]] = None
                         ) -> torch.Tensor:
        """B x D descriptors before whitening, multi-scale when ``scales`` (default:
        ``test_scales``) has several scales (eval only)."""
        scales = self.test_scales if scales is None else tuple(scales)
        if self.training or scales == (1.0,):
            return self._embed(inputs, self.backbone, self.neck)
        p = self.multi_scale_power
        if p == 'gem':
            p = float(self._gem_power())
        acc, descs = 0, []
        for scale in scales:
            x = inputs if scale == 1.0 else F.interpolate(
                inputs, scale_factor=scale, mode='bilinear', align_corners=False)
            desc = self._embed(x, self.backbone, self.neck)
            if self.multi_scale_pool is not None:
                descs.append(desc)
                continue
            if p != 1.0 and bool((desc < 0).any()):
                raise ValueError(f'ImageRetriever: multi_scale_power={p} needs non-negative '
                                 'descriptors (e.g. GeM of ReLU maps); use 1 for a plain mean.')
            acc = acc + desc.pow(p)
        desc = self.multi_scale_pool(descs) if descs else (acc / len(scales)).pow(1.0 / p)
        return F.normalize(desc, dim=-1) if self.normalize else desc

    def forward(self, inputs: torch.Tensor, data_samples: Optional[List[DataSample]] = None,
                mode: str = 'tensor'):
        if mode == 'tensor':
            return self.extract_feat(inputs)
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        raise ValueError(f'ImageRetriever: invalid mode {mode!r}; use "tensor", "loss" or '
                         '"predict".')

    @torch.no_grad()
    def _momentum_update(self) -> None:
        m = self.momentum
        online = list(self.backbone.parameters()) + list(self.neck.parameters())
        for k, q in zip(self.momentum_encoder.parameters(), online):
            k.mul_(m).add_(q.detach(), alpha=1.0 - m)
        online_buffers = list(self.backbone.buffers()) + list(self.neck.buffers())
        for k, q in zip(self.momentum_encoder.buffers(), online_buffers):
            k.copy_(q)

    def loss(self, inputs: torch.Tensor, data_samples: List[DataSample]) -> Dict[str, torch.Tensor]:
        if self.head is None:
            raise RuntimeError('ImageRetriever: training needs a head (model.head in the config).')
        labels = torch.stack([s.gt_label for s in data_samples]).to(inputs.device)
        embeddings = self._embed(inputs, self.backbone, self.neck)
        memory_embeddings = None
        if self.momentum_encoder is not None:
            self._momentum_update()
            with torch.no_grad():
                memory_embeddings = self._embed(
                    inputs, self.momentum_encoder['backbone'], self.momentum_encoder['neck'])
        return self.head.loss(embeddings, labels, memory_embeddings=memory_embeddings)

    def _extract_by_role(self, inputs: torch.Tensor,
                         data_samples: Optional[List[DataSample]]) -> torch.Tensor:
        """Raw descriptors, queries at ``query_test_scales`` and the rest at ``test_scales``;
        each sample embedded once."""
        if self.query_test_scales is None or data_samples is None:
            return self.extract_raw_feat(inputs)
        is_query = torch.tensor([bool(s.get('is_query', False)) for s in data_samples],
                                device=inputs.device)
        if not is_query.any():
            return self.extract_raw_feat(inputs)
        if is_query.all():
            return self.extract_raw_feat(inputs, self.query_test_scales)
        queries = self.extract_raw_feat(inputs[is_query], self.query_test_scales)
        others = self.extract_raw_feat(inputs[~is_query])
        raw = queries.new_empty(len(is_query), queries.shape[1])
        raw[is_query] = queries
        raw[~is_query] = others
        return raw

    def predict(self, inputs: torch.Tensor,
                data_samples: Optional[List[DataSample]] = None) -> List[DataSample]:
        raw = self._extract_by_role(inputs, data_samples)
        embeddings = self._whiten(raw)
        if data_samples is None:
            data_samples = [DataSample() for _ in range(embeddings.shape[0])]
        for i, sample in enumerate(data_samples):
            sample.set_embedding(embeddings[i].detach())
            if embeddings is not raw:
                sample.set_field(raw[i].detach(), 'embedding_raw')
        return data_samples
