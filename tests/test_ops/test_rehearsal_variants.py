"""The parts of a config its rehearsal kind ignores (DToP's fusion modes, ELM ablations, branches,
multi-scale queries, the whitening refit on test; irtbox.ops.rehearsal_kinds): the model of one
config per distinct value, built from the config, trained one step and run in eval on two gloo
ranks (DDP, tiny inputs, random weights), so that a part only those configs use cannot break on
several processes unseen by the every-kind rehearsal."""
import copy
import functools
import glob
import os.path as osp

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as mp
from mmengine.config import Config

from irtbox.ops.miniaturize import config_dicts, scale_input_size, shallow_backbone

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
INPUT = 32


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


def tiny_model_cfg(cfg: Config) -> dict:
    cfg = copy.deepcopy(cfg)
    shallow_backbone(cfg)
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


CHUNKS = 4  # the models are spread over separate tests, which pytest-xdist runs side by side


@pytest.mark.slow
def test_each_ignored_part_has_its_representative():
    names = {osp.basename(p) for p in representatives()}
    # The list names what the kinds miss.
    assert {'dtop_r50-vit-b_fusion-concat_8xb8-30e_sfm120k.py',
            'dtop_r50-vit-b_no-aspp_8xb8-30e_sfm120k.py',
            'dtop_r50-vit-b_q-multi-db-single_8xb8-30e_sfm120k.py'} <= names, sorted(names)
    assert any('local-patch' in name for name in names), sorted(names)


@pytest.mark.slow
@pytest.mark.parametrize('chunk', range(CHUNKS))
def test_every_variant_the_kind_ignores_trains_and_embeds_on_two_ranks(tmp_path, chunk,
                                                                      timm_cache):
    # timm_cache: shrinking reads each backbone's structure off a timm model on the meta device
    # (two a config, seconds each); the configs share two backbones, so each is made once.
    chosen = sorted(representatives().items())[chunk::CHUNKS]
    models = {name: tiny_model_cfg(cfg) for name, cfg in chosen}
    mp.get_context('forkserver').set_forkserver_preload([__name__])
    mp.start_processes(_rank, args=(2, str(tmp_path / 'init'), models), nprocs=2,
                       start_method='forkserver')
