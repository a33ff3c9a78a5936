"""The DToP configs carry the paper's recipe, and each ablation changes exactly its factor.

Recipe facts (Song et al., WACV 2023, supplementary A.1): ArcFace margin 0.15, batch 64, SGD
momentum 0.9, lr 1e-3, cosine decay with factor 1e-4, warm-up 0 / 3 / 5 / 5 epochs on NC-clean /
SfM-120k / GLDv1-noisy / GLDv2-clean; k = 6 layers (Table A8), DPE bilinear (Table A9), N = 1536
(Table A7), 3 test scales (A.4). Class counts: Table A6(a), except SfM-120k, whose 'train' split
has the 551 3D models of its train clusters (docs/protocols.md, "SfM-120k"), not the 713 of
train + val.

Each ablation config is compared with the default, key by key: the keys that differ must be
exactly the ones its table row names, with the row's value. Every config's model is built by
test_build_configs.py.
"""
import glob
import math
import os.path as osp
import re

import pytest
import torch
from mmengine.config import Config

import mmengine.optim  # noqa: F401  (registers MMEngine's parameter schedulers)
from irtbox.registry import MODELS, PARAM_SCHEDULERS

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DTOP = osp.join(ROOT, 'configs', 'dtop')
MAIN = 'dtop_r50-vit-b_8xb8-30e_sfm120k.py'
ALIAS = 'r50vitb_sfm.py'
CONFIGS = sorted(osp.relpath(p, DTOP) for p in glob.glob(osp.join(DTOP, '**', '*.py'),
                                                          recursive=True))
ABLATIONS = [c for c in CONFIGS if osp.dirname(c)]

# dataset tag -> (dataset type, data_root, ArcFace classes, warm-up epochs)
TRAIN_SETS = {
    'sfm120k': ('SfM120kDataset', 'data/sfm120k', 551, 3),
    'ncclean': ('NCCleanDataset', 'data/ncclean', 581, 0),
    'gldv1noisy': ('GLDv1NoisyDataset', 'data/gldv1noisy', 14951, 5),
    'gldv2clean': ('GLDv2CleanDataset', 'data/gldv2clean', 81313, 5),
}
MAIN_CONFIGS = [f'dtop_r50-vit-b_8xb8-30e_{tag}.py' for tag in TRAIN_SETS]
LR, MIN_LR_FACTOR, WARMUP_START = 1e-3, 1e-4, 1e-3
MULTI_SCALE = (1.0, math.sqrt(0.5), 0.5)
NAME = re.compile(r'^dtop_(?P<backbone>[a-z0-9.-]+?)(?:_(?P<setting>[a-z0-9.-]+))?'
                  r'_(?P<procs>\d+)xb(?P<batch>\d+)-(?P<epochs>\d+)e_(?P<dataset>[a-z0-9]+)\.py$')


def load(rel_path):
    return Config.fromfile(osp.join(DTOP, rel_path))


def parse(rel_path):
    match = NAME.match(osp.basename(rel_path))
    assert match, f'configs/dtop/{rel_path}: unexpected name'
    return match.groupdict()


def flatten(value, prefix=''):
    """{dotted key: leaf}; dicts and lists are walked (list items by index), tuples are leaves."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return {prefix: value}
    flat = {}
    for key, item in items:
        flat.update(flatten(item, f'{prefix}.{key}' if prefix else str(key)))
    return flat


def lookup(cfg_dict, dotted):
    value = cfg_dict
    for key in dotted.split('.'):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def assert_changes(rel_path, expected):
    """The keys of ``rel_path`` that differ from the default are exactly the subtrees named in
    ``expected`` (dotted key -> the new value), and each of them does differ."""
    default, cfg = load(MAIN).to_dict(), load(rel_path).to_dict()
    flat_default, flat_cfg = flatten(default), flatten(cfg)
    differ = {k for k in set(flat_default) | set(flat_cfg)
              if flat_default.get(k, KeyError) != flat_cfg.get(k, KeyError)}
    for key, value in expected.items():
        assert lookup(cfg, key) == value, f'configs/dtop/{rel_path}: {key}'
        covered = {k for k in differ if k == key or k.startswith(key + '.')}
        assert covered, f'configs/dtop/{rel_path}: {key} is the same as the default'
        differ -= covered
    assert not differ, f'configs/dtop/{rel_path} also changes {sorted(differ)}'


def cosine_schedule(begin):
    """Table A5's / NC-clean's schedule: cosine from lr at epoch ``begin`` to the end."""
    return [dict(type='CosineAnnealingLR', eta_min_ratio=MIN_LR_FACTOR, by_epoch=True,
                 begin=begin, end=30, T_max=30 - begin, convert_to_iter_based=True)]


def neck(**kwargs):
    return [dict(type='DToPNeck', in_channels=kwargs.pop('in_channels', 768), **kwargs)]


# ---------------------------------------------------------------- the main configs


def test_shipped():
    assert set(MAIN_CONFIGS) <= set(CONFIGS)
    alias = load(ALIAS)
    assert alias.to_dict() == load(MAIN).to_dict()
    expected = {f'tableA7/dtop_r50-vit-b_n{n}_8xb8-30e_sfm120k.py'
                for n in (128, 256, 512, 768, 1024, 2048)}
    expected |= {f'tableA8/dtop_r50-vit-b_k{k}_8xb8-30e_sfm120k.py' for k in (1, 3, 9, 12)}
    expected |= {f'tableA9/dtop_r50-vit-b_pe-{pe}_8xb8-30e_sfm120k.py'
                 for pe in ('none', 'cpe', 'dpe-bicubic')}
    expected |= {f'tableA10/dtop_{bb}_no-{c}_8xb8-30e_sfm120k.py'
                 for bb in ('r50-vit-b', 'vit-b') for c in ('irb', 'aspp', 'wb')}
    expected |= {'tableA10/dtop_vit-b_8xb8-30e_sfm120k.py'}
    expected |= {f'tableA11/dtop_r50-vit-b_q-{q}-db-{d}_8xb8-30e_sfm120k.py'
                 for q, d in (('single', 'single'), ('multi', 'single'), ('single', 'multi'))}
    expected |= {'tableA12/dtop_r50-vit-b_fixed-384_8xb8-30e_sfm120k.py'}
    expected |= {f'tableA13/dtop_r50-vit-b_fusion-{f}_8xb8-30e_sfm120k.py'
                 for f in ('y', 'u', 'sum', 'hadamard', 'concat', 'fast-normalized')}
    expected |= {f'tableA5/dtop_{bb}_{feat}_8xb8-30e_sfm120k.py'
                 for bb in ('r50-vit-b', 'vit-b', 'deit-b-dist', 'pit-b-dist')
                 for feat in ('global-cls', 'local-patch')}
    expected |= {f'tableA5/dtop_{bb}_global-dist_8xb8-30e_sfm120k.py'
                 for bb in ('deit-b-dist', 'pit-b-dist')}
    assert set(ABLATIONS) == expected


@pytest.mark.parametrize('rel_path', MAIN_CONFIGS)
def test_main_recipe(rel_path):
    parts = parse(rel_path)
    dataset_type, data_root, num_classes, _ = TRAIN_SETS[parts['dataset']]
    cfg = load(rel_path)
    # Batch 64 = processes x images per process, one aspect-ratio group per batch.
    loader = cfg.train_dataloader
    assert int(parts['procs']) * loader.batch_size == 64
    assert loader.batch_size == int(parts['batch'])
    assert loader.sampler == dict(type='GroupSizeSampler', batch_size=loader.batch_size)
    steps = [step['type'] for step in loader.dataset.pipeline]
    assert steps == ['LoadImageFromFile', 'GroupResize', 'RandomIllumination',
                     'PackRetrievalInputs']
    assert (loader.dataset.type, loader.dataset.data_root) == (dataset_type, data_root)
    assert cfg.train_cfg == dict(type='EpochBasedTrainLoop', max_epochs=int(parts['epochs']))
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.momentum) == ('SGD', LR, 0.9)
    # Model: the hybrid, the last 6 blocks, DPE bilinear, the default neck, 1536-d throughout.
    model = cfg.model
    # Named once: the TimmDataPreprocessor takes the backbone's model_name.
    assert model.backbone.model_name == 'vit_base_r50_s16_384'
    assert 'model_name' not in model.data_preprocessor
    assert model.backbone.out_indices == (-6, -5, -4, -3, -2, -1)
    assert (model.backbone.pos_embed, model.backbone.norm) == ('dpe-bilinear', 'all')
    assert model.neck == neck()
    assert MODELS.build(model.neck[0]).out_dim == 1536
    arcface = dict(type='ArcFaceLoss', num_classes=num_classes, embed_dim=1536, margin=0.15,
                   scale=30.0)
    if num_classes > 50000:  # GLDv2-clean: the centres sharded, none sampled (Partial FC)
        arcface['partial_fc'] = dict(sample_rate=1.0)
    assert model.head.losses == dict(arcface=arcface)
    assert model.whitening == dict(type='LearnedWhitening', in_dim=1536)
    assert model.test_scales == pytest.approx(MULTI_SCALE, abs=1e-4)
    assert model.get('query_test_scales') is None
    # Test: ROxford5k / RParis6k Medium and Hard, with and without whitening.
    assert [d.dataset.dataset_name for d in cfg.test_dataloader] == ['roxford5k', 'rparis6k']
    for metrics in cfg.test_evaluator:
        assert [(m.type, tuple(m.protocols), m.get('embedding_key')) for m in metrics] == [
            ('RevisitedMetric', ('medium', 'hard'), None),
            ('RevisitedMetric', ('medium', 'hard'), 'embedding_raw')]
    hooks = [h for h in cfg.custom_hooks if h.type == 'WhiteningFitHook']
    assert len(hooks) == 1 and hooks[0].dataloader.dataset.type == 'SfMWhitenDataset'


def learning_rates(cfg, epoch_length):
    """The lr of every iteration, from MMEngine's schedulers built as the runner builds them."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))],
                                lr=cfg.optim_wrapper.optimizer.lr)
    schedulers = []
    for scheduler in cfg.param_scheduler:
        scheduler = dict(scheduler)
        cls = PARAM_SCHEDULERS.get(scheduler.pop('type'))
        assert scheduler.pop('convert_to_iter_based') is True
        schedulers.append(cls.build_iter_from_epoch(optimizer, epoch_length=epoch_length,
                                                    **scheduler))
    lrs = []
    for _ in range(cfg.train_cfg.max_epochs * epoch_length):
        lrs.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        for scheduler in schedulers:
            scheduler.step()
    return lrs


@pytest.mark.parametrize('rel_path', MAIN_CONFIGS + [
    'tableA5/dtop_deit-b-dist_global-dist_8xb8-30e_sfm120k.py'])
def test_lr_schedule(rel_path):
    """Linear warm-up from 1e-3 x lr to lr over the warm-up epochs, then cosine from lr to
    1e-4 x lr at the end of the last epoch (Table A5: no warm-up)."""
    warmup = 0 if 'tableA5' in rel_path else TRAIN_SETS[parse(rel_path)['dataset']][3]
    epoch_length = 3
    lrs = learning_rates(load(rel_path), epoch_length)
    n_warm = warmup * epoch_length
    total = len(lrs) - n_warm
    expected = [LR * (WARMUP_START + (1 - WARMUP_START) * i / (n_warm - 1))
                for i in range(n_warm)]
    eta = LR * MIN_LR_FACTOR
    expected += [eta + (LR - eta) * (1 + math.cos(math.pi * j / total)) / 2
                 for j in range(total)]
    assert lrs == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------- ablations vs the default

A5_BACKBONES = {  # tag -> (timm name, token width, k)
    'r50-vit-b': ('vit_base_r50_s16_384', 768, 6),
    'vit-b': ('vit_base_patch16_384', 768, 6),
    'deit-b-dist': ('deit_base_distilled_patch16_384', 768, 6),
    'pit-b-dist': ('pit_b_distilled_224', 1024, 4),  # its last stage: 4 blocks, 1024-wide
}
ELM_OFF = dict(irb='irb', aspp='aspp', wb='waveblock')
WHITEN_HOOK = 'custom_hooks.0.refit_on_test'


def expected_changes(rel_path):
    """The row of the supplementary's table that ``rel_path`` runs, as config changes."""
    table = osp.dirname(rel_path)
    parts = parse(rel_path)
    backbone, setting = parts['backbone'], parts['setting']
    assert (parts['procs'], parts['batch'], parts['epochs'], parts['dataset']) == (
        '8', '8', '30', 'sfm120k')
    if table == 'tableA7':
        n = int(re.fullmatch(r'n(\d+)', setting)[1])
        return {'model.neck.0.out_dim': n, 'model.head.losses.arcface.embed_dim': n,
                'model.whitening.in_dim': n}
    if table == 'tableA8':
        k = int(re.fullmatch(r'k(\d+)', setting)[1])
        return {'model.backbone.out_indices': tuple(range(-k, 0))}
    if table == 'tableA9':
        return {'model.backbone.pos_embed': re.fullmatch(r'pe-(.+)', setting)[1]}
    if table == 'tableA10':
        changes = {}
        if backbone == 'vit-b':  # no CNN stem
            changes = {'model.backbone.model_name': 'vit_base_patch16_384'}
        if setting is not None:
            off = ELM_OFF[re.fullmatch(r'no-(.+)', setting)[1]]
            changes['model.neck.0.elm'] = {'type': 'EnhancedLocalityModule', off: False}
        return changes
    if table == 'tableA11':
        query, database = re.fullmatch(r'q-(\w+)-db-(\w+)', setting).groups()
        scales = dict(single=(1.0, ), multi=pytest.approx(MULTI_SCALE, abs=1e-4))
        changes = {WHITEN_HOOK: True}
        if database == 'single':
            changes['model.test_scales'] = scales['single']
        if query != database:
            changes['model.query_test_scales'] = scales[query]
        return changes
    if table == 'tableA12':
        assert setting == 'fixed-384'
        return {'train_dataloader.sampler': dict(type='DefaultSampler', shuffle=True),
                'train_dataloader.drop_last': True,
                'train_dataloader.dataset.pipeline.1.sizes': ((384, 384), ) * 5}
    if table == 'tableA13':
        mode = re.fullmatch(r'fusion-(.+)', setting)[1].replace('-', '_')
        changes = {'model.neck.0.fusion': dict(type='FeatureFusion', mode=mode)}
        if mode == 'y':  # Y alone: no ELM
            changes['model.neck.0.elm'] = None
        return changes
    if table == 'tableA5':
        timm_name, width, k = A5_BACKBONES[backbone]
        branch, token = setting.split('-')
        if branch == 'global':
            head = neck(in_channels=width, branches='global', global_token=token, out_dim=768,
                        project=True)
        else:
            assert token == 'patch'
            head = neck(in_channels=width, branches='local',
                        fusion=dict(type='FeatureFusion', mode='y'), elm=None, pool='avg',
                        out_dim=768, project=True)
        changes = {'model.neck': head, 'model.head.losses.arcface.embed_dim': 768,
                   'model.whitening.in_dim': 768, 'param_scheduler': cosine_schedule(0)}
        if backbone != 'r50-vit-b':
            changes['model.backbone.model_name'] = timm_name
        if k != 6:
            changes['model.backbone.out_indices'] = tuple(range(-k, 0))
        return changes
    raise AssertionError(f'configs/dtop/{rel_path}: no table for this folder')


@pytest.mark.slow
@pytest.mark.parametrize('rel_path', ABLATIONS)
def test_ablation_changes_one_factor(rel_path):
    assert_changes(rel_path, expected_changes(rel_path))


@pytest.mark.slow
def test_a11_scales():
    """The query / database scales are the table's rows (default: multi / multi)."""
    rows = {}
    for rel_path in (c for c in ABLATIONS if c.startswith('tableA11')):
        cfg = load(rel_path).model
        query = cfg.get('query_test_scales') or cfg.test_scales
        rows[parse(rel_path)['setting']] = (len(query), len(cfg.test_scales))
    assert rows == {'q-single-db-single': (1, 1), 'q-multi-db-single': (3, 1),
                    'q-single-db-multi': (1, 3)}


@pytest.mark.parametrize('rel_path', [c for c in MAIN_CONFIGS if c != MAIN])
def test_training_set_changes(rel_path):
    dataset_type, data_root, num_classes, warmup = TRAIN_SETS[parse(rel_path)['dataset']]
    changes = {'num_classes': num_classes, 'model.head.losses.arcface.num_classes': num_classes,
               'train_dataloader.dataset.type': dataset_type,
               'train_dataloader.dataset.data_root': data_root}
    if dataset_type in ('NCCleanDataset', 'GLDv1NoisyDataset'):
        changes['train_dataloader.dataset.skip_missing'] = True  # URL lists: dead links
    if dataset_type == 'GLDv2CleanDataset':  # 81,313 centres sharded (Partial FC)
        changes['model.head.losses.arcface.partial_fc.sample_rate'] = 1.0
    if warmup != 3:
        changes['param_scheduler'] = [
            dict(type='LinearLR', start_factor=WARMUP_START, by_epoch=True, begin=0, end=warmup,
                 convert_to_iter_based=True)] * bool(warmup) + cosine_schedule(warmup)
    assert_changes(rel_path, changes)


# ---------------------------------------------------------------- model zoo


@pytest.mark.slow
def test_metafile():
    import yaml
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        assert 'configs/dtop/metafile.yml' in yaml.safe_load(f)['Import']
    with open(osp.join(DTOP, 'metafile.yml')) as f:
        meta = yaml.safe_load(f)
    collections = {c['Name'] for c in meta['Collections']}
    listed = []
    for entry in meta['Models']:
        assert entry['In Collection'] in collections
        assert entry['Weights'] is None
        assert entry['Name'] == osp.splitext(osp.basename(entry['Config']))[0]
        assert entry['Results'], entry['Name']
        for result in entry['Results']:
            assert re.match(r'paper, Table A\d+', result['Source']), entry['Name']
        listed.append(entry['Config'])
    assert sorted(listed) == sorted(f'configs/dtop/{c}' for c in CONFIGS if c != ALIAS)


def _a9_ranks(rank, world, port, modes):
    """One rank: for each position embedding, the tiny DToP model under DDP, 2 training
    steps on its own 2 images."""
    import os
    from mmengine.model import MMDistributedDataParallel
    from mmengine.optim import OptimWrapper

    from irtbox.apis import register_all_modules
    from irtbox.structures import DataSample
    torch.set_num_threads(1)  # no OpenMP thread pool in a forked child
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.distributed.init_process_group('gloo', rank=rank, world_size=world)
    try:
        register_all_modules()
        tiny = Config.fromfile(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_dtop.py'))
        for mode in modes:
            torch.manual_seed(0)
            model = MMDistributedDataParallel(
                MODELS.build(dict(tiny.model, backbone=dict(tiny.model.backbone,
                                                            pos_embed=mode))), device_ids=None)
            optim = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
            for step in range(2):
                inputs = [torch.randint(0, 256, (3, 40, 56), dtype=torch.uint8)
                          for _ in range(2)]
                samples = [DataSample().set_gt_label(2 * rank + i) for i in range(2)]
                model.train_step(dict(inputs=inputs, data_samples=samples), optim)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_a9_variants_train_two_iterations_on_two_processes():
    """Each Table A9 position embedding on the tiny DToP model, under DDP on 2 CPU processes:
    a parameter a variant leaves unused (the learned embedding that 'none' and 'cpe' do not
    add) stops the second iteration ("Expected to have finished reduction ...")."""
    import torch.multiprocessing as mp

    from irtbox.utils.dist import free_port
    from tests.shared_runs import forkserver
    modes = [load(c).model.backbone.pos_embed for c in CONFIGS if c.startswith('tableA9/')]
    assert sorted(modes) == ['cpe', 'dpe-bicubic', 'none']
    # Ranks from a fork server (one import of torch and irtbox for both): a forked child of
    # this worker could not run a backward once the worker has run one (autograd's threads).
    mp.start_processes(_a9_ranks, args=(2, free_port(), modes), nprocs=2, join=True,
                       start_method=forkserver(__name__))
