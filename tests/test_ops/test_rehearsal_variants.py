"""The parts of a config its rehearsal kind ignores (DToP's fusion modes, ELM ablations, branches,
multi-scale queries, the whitening refit on test; irtbox.ops.rehearsal_kinds): the model of one
config per distinct value, built from the config, trained one step and run in eval on two gloo
ranks (DDP, tiny inputs, random weights), so that a part only those configs use cannot break on
several processes unseen by the every-kind rehearsal. The models are narrowed too (the
transformer, a hybrid's ResNet stem, and the neck, loss and whitening dimensions that follow the
transformer's width: :func:`narrow`): every module of each variant runs, on small tensors."""
import copy
import functools
import glob
import os.path as osp

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp
from mmengine.config import Config

from irtbox.ops.miniaturize import (config_dicts, scale_input_size, shallow_backbone,
                                    timm_model)
from tests.conftest import narrow_hybrid_embed
from tests.shared_runs import forkserver

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
INPUT = 32
WIDTH, HEADS = 64, 2  # the narrowed transformer: 2 heads of 32 (ViT-B: 12 of 64, 768 wide)
# The model's dimensions that follow the transformer's width D (the neck's input and output,
# the loss's and the whitening's): D -> WIDTH, 2D -> 2 x WIDTH.
_WIDTH_KEYS = ('in_channels', 'out_dim', 'embed_dim', 'in_dim')


def ignored_parts(cfg: Config) -> dict:
    """{part: value} of what the kind does not tell apart."""
    parts = {}
    for node in config_dicts(cfg.model.get('neck')):
        if 'fusion' in node:
            parts['fusion'] = (node['fusion'] or {}).get('mode')
        if 'elm' in node:
            elm = node['elm']
            parts['elm'] = None if elm is None else tuple(sorted(
                (k, v) for k, v in elm.items() if k != 'type'))
        if 'branches' in node:
            parts['branches'] = (node['branches'], node.get('global_token'))
    parts['scales'] = (len(cfg.model.get('test_scales') or (1.0, )),
                       len(cfg.model.get('query_test_scales') or ()))
    parts['refit_on_test'] = any(h.get('refit_on_test') for h in cfg.get('custom_hooks') or [])
    return parts


@functools.lru_cache(maxsize=None)
def representatives() -> dict:
    """{config: its model config, shrunk} for the first config (by path) of every distinct
    value of each ignored part."""
    chosen, seen = {}, set()
    for path in sorted(glob.glob(osp.join(ROOT, 'configs', 'dtop', '**', '*.py'),
                                 recursive=True)):
        cfg = Config.fromfile(path)
        new = {(part, value) for part, value in ignored_parts(cfg).items()} - seen
        if new:
            seen |= new
            chosen[osp.relpath(path, ROOT)] = cfg
    return chosen


def narrow(cfg: Config, model) -> None:
    """The transformer WIDTH wide, in HEADS heads, and every dimension of the neck, head and
    whitening that is D or 2 D (the width, or the DToP neck's global + local) scaled with it;
    a hybrid's ResNet stem narrowed too (:func:`narrow_hybrid_embed`, given to timm as the
    ``embed_layer``). ``model``: the config's timm model (on the meta device)."""
    from timm.layers import HybridEmbed
    from timm.models.resnetv2 import ResNetV2
    backbone = cfg.model.backbone
    width = model.embed_dim
    backbone.update(embed_dim=WIDTH, num_heads=HEADS)
    if isinstance(model.patch_embed, HybridEmbed):
        assert isinstance(model.patch_embed.backbone, ResNetV2), model.patch_embed.backbone
        layers = tuple(len(stage.blocks) for stage in model.patch_embed.backbone.stages)
        backbone.embed_layer = functools.partial(narrow_hybrid_embed, layers)
    scaled = {width: WIDTH, 2 * width: 2 * WIDTH}
    changed = 0
    for part in ('neck', 'head', 'whitening'):
        for node in config_dicts(cfg.model.get(part)):
            for key in _WIDTH_KEYS:
                if key in node:
                    assert node[key] in scaled, f'{part} {key}={node[key]} (width {width})'
                    node[key] = scaled[node[key]]
                    changed += 1
    assert changed >= 3, changed  # the neck's input, the loss's and the whitening's


def tiny_model_cfg(cfg: Config) -> dict:
    cfg = copy.deepcopy(cfg)
    full = timm_model(cfg.model.backbone)  # the one shallow_backbone reads (timm_cache)
    shallow_backbone(cfg)
    narrow(cfg, full)
    scale_input_size(cfg, INPUT)
    cfg.model.backbone.update(pretrained=False, checkpoint=None, init_cfg=None)
    return cfg.model.to_dict()


def _rank(rank, world, init_file, models):
    from mmengine.registry import DefaultScope
    from torch.nn.parallel import DistributedDataParallel

    import timm

    from irtbox.apis.setup_env import register_all_modules
    from irtbox.registry import MODELS
    from irtbox.structures import DataSample
    from tests.conftest import caching_timm_create
    torch.set_num_threads(1)
    # The configs share two backbones: each timm model is made once a rank, then copied (the
    # ranks make the same calls from the same seed, so their weights still agree).
    timm.create_model = caching_timm_create(timm.create_model)
    torch_dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank,
                                  world_size=world)
    register_all_modules(init_default_scope=False)
    try:
        for name, model_cfg in models.items():
            torch.manual_seed(0)  # the same random weights on every rank
            with DefaultScope.overwrite_default_scope('irtbox'):
                model = MODELS.build(copy.deepcopy(model_cfg))
            model.init_weights()
            ddp = DistributedDataParallel(model, find_unused_parameters=True)
            g = torch.Generator().manual_seed(rank)
            inputs = torch.randn(2, 3, INPUT, INPUT, generator=g)
            samples = [DataSample().set_gt_label(2 * rank + i) for i in range(2)]
            losses = ddp(inputs, samples, mode='loss')
            loss = sum(v for k, v in losses.items() if 'loss' in k)
            assert torch.isfinite(loss), f'{name}: loss {loss}'
            loss.backward()
            for module in model.modules():  # what the fit hook learns: any values
                if hasattr(module, 'set_projection'):
                    module.set_projection(torch.zeros(module.in_dim),
                                          torch.eye(module.out_dim, module.in_dim))
            model.eval()
            for i, sample in enumerate(samples):
                sample.set_field(i == 0, 'is_query', field_type='metainfo')
            with torch.no_grad():
                out = model(inputs, samples, mode='predict')
            assert all(torch.isfinite(s.embedding).all() for s in out), name
    finally:
        torch_dist.destroy_process_group()


CHUNKS = 2  # the models are spread over separate tests, which pytest-xdist runs side by side


@pytest.mark.slow
def test_each_ignored_part_has_its_representative():
    names = {osp.basename(p) for p in representatives()}
    # The list names what the kinds miss.
    assert {'dtop_r50-vit-b_fusion-concat_8xb8-30e_sfm120k.py',
            'dtop_r50-vit-b_no-aspp_8xb8-30e_sfm120k.py',
            'dtop_r50-vit-b_q-multi-db-single_8xb8-30e_sfm120k.py'} <= names, sorted(names)
    assert any('local-patch' in name for name in names), sorted(names)


@pytest.mark.slow
def test_every_variant_the_kind_ignores_trains_and_embeds_on_two_ranks(tmp_path, timm_cache):
    # timm_cache: shrinking reads each backbone's structure off a timm model on the meta device
    # (two a config, seconds each); the configs share two backbones, so each is made once.
    # All the models in one pair of ranks: narrowed, each takes a fraction of a second, less
    # than a start of the ranks.
    models = {name: tiny_model_cfg(cfg) for name, cfg in sorted(representatives().items())}
    assert len(models) == 16, sorted(models)
    mp.start_processes(_rank, args=(2, str(tmp_path / 'init'), models), nprocs=2,
                       start_method=forkserver(__name__))
