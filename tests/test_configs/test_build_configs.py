"""Every config under configs/ loads, builds its model (random weights), names only registered
parts and follows the naming rule; the IRT configs carry the recipe of the paper.

Naming rule (docs/README.md, "Config file names"):
``{method}_{backbone}[_{setting}][_{training}]_{dataset}.py``, e.g.
``irt-r_deit-s_1xb64-35k_sop.py``, ``irt_deit-s_beta0.3-lambda0.5_1xb64-35k_sop.py`` (an ablation
setting), ``irt-o_deit-s_sop.py`` (no training field: a test-only config). ``NxbB`` is N processes
x B images per process; a trailing ``-<n>`` / ``-<n>k`` tag is the number of iterations.

Building is the slow part (timm initialises every weight), so each distinct timm architecture is
created once and shared by the models built afterwards (``timm_cache``); they are the real ones.
One forward of one image per distinct (backbone, pooler) gives the descriptor dimension that the
PCA neck and the losses (``embed_dim``) must expect.

The recipe values asserted below are facts stated in El-Nouby et al. 2021 ("Training Vision
Transformers for Image Retrieval", Sec. 4.1 and Tables 2-5, 9) and in the dataset definitions
(docs/protocols.md), not numbers computed from the code.
"""
import copy
import functools
import glob
import os
import os.path as osp
import re

import mmengine.runner  # noqa: F401  (registers MMEngine's hooks, loops and optimizers)
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from irtbox.models.necks import PCAReduction
from irtbox.registry import (DATA_SAMPLERS, DATASETS, HOOKS, LOOPS, METRICS, MODELS,
                             OPTIM_WRAPPERS, OPTIMIZERS, PARAM_SCHEDULERS, TRANSFORMS)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG_DIR = osp.join(ROOT, 'configs')
CONFIGS = sorted(
    osp.relpath(p, CONFIG_DIR)
    for p in glob.glob(osp.join(CONFIG_DIR, '**', '*.py'), recursive=True)
    # _base_ files are fragments; sweeps/ holds grid specs for tools/sweep.py (test_sweep_specs.py)
    if not {'_base_', 'sweeps'} & set(osp.relpath(p, CONFIG_DIR).split(os.sep)))
# Category-level IRT configs (the particular-object ones under irt/landmarks/ are checked in
# test_landmark_configs.py).
IRT_CONFIGS = [c for c in CONFIGS
               if c.startswith('irt' + os.sep) and not c.startswith(osp.join('irt', 'landmarks'))]
# Short names kept for commands quoted in the issues; each only inherits a rule-named config.
SHORT_ALIASES = {osp.join('dtop', 'r50vitb_sfm.py')}
IRT_MAIN = [c for c in IRT_CONFIGS if c.count(os.sep) == 1]

_PART = r'[a-z][a-z0-9.]*(?:-[a-z0-9.]+)*'  # lower case, starts with a letter
NAME_RULE = re.compile(
    rf'^(?P<method>{_PART})_(?P<backbone>{_PART})(?:_(?P<setting>{_PART}))??'
    rf'(?:_(?P<training>\d+xb\d+(?:-[a-z0-9.]+)*))?_(?P<dataset>[a-z][a-z0-9]*)\.py$')

# Facts of the datasets (docs/protocols.md) and of the IRT recipe (paper Sec. 4.1).
TRAIN_SIZE = dict(sop=59551, cub=5864, inshop=25882)
MEMORY_SIZE = dict(sop=59551, cub=5864, inshop=5176)  # In-Shop: int(0.2 x 25,882)
MAX_ITERS = dict(sop=35000, cub=2000, inshop=35000)
DATASET_TYPE = dict(sop='SOPDataset', cub='CUBDataset', inshop='InShopDataset')
# backbone tag -> (timm model name, descriptor dimension, pooler)
BACKBONES = {
    'deit-s': ('deit_small_patch16_224', 384, 'ClsTokenPool'),
    'deit-s-dist': ('deit_small_distilled_patch16_224', 384, 'ClsTokenPool'),
    'deit-b': ('deit_base_patch16_224', 768, 'ClsTokenPool'),
    'r50': ('resnet50.tv_in1k', 2048, 'AvgPool'),
}


def parse_name(rel_path):
    match = NAME_RULE.match(osp.basename(rel_path))
    assert match, (f'configs/{rel_path}: the name does not follow '
                   '{method}_{backbone}[_{setting}][_{training}]_{dataset}.py')
    return match.groupdict()


@functools.lru_cache(maxsize=None)
def load(rel_path):
    return Config.fromfile(osp.join(CONFIG_DIR, rel_path))


def loss_cfgs(model_cfg):
    return dict(model_cfg.head.losses) if model_cfg.get('head') else {}


# ---------------------------------------------------------------- every config


@pytest.mark.parametrize('name, parts', [
    ('irt-r_deit-s_1xb64-35k_sop.py', ('irt-r', 'deit-s', None, '1xb64-35k', 'sop')),
    ('irt_deit-s_beta0.3-lambda0.5_1xb64-35k_sop.py',
     ('irt', 'deit-s', 'beta0.3-lambda0.5', '1xb64-35k', 'sop')),
    ('irt-o_deit-s_sop.py', ('irt-o', 'deit-s', None, None, 'sop')),
    ('dtop_r50-vit-b_8xb64_sfm120k.py', ('dtop', 'r50-vit-b', None, '8xb64', 'sfm120k')),
    ('irt-r_deit-s_sop_1xb64.py', None),  # dataset before training
    ('irt-r_DeiT-S_1xb64-35k_sop.py', None),  # upper case
    ('irt-r_1xb64-35k_sop.py', None),  # no backbone
    ('irt-r deit-s_1xb64-35k_sop.py', None),
])
def test_name_rule(name, parts):
    match = NAME_RULE.match(name)
    assert (tuple(match.groupdict().values()) if match else None) == parts


def test_irt_configs_shipped():
    shipped = {osp.relpath(c, 'irt').replace(os.sep, '/') for c in IRT_CONFIGS}
    length = dict(sop='35k', cub='2k', inshop='35k')
    expected = {f'irt-o_deit-s_{ds}.py' for ds in length}
    expected |= {f'irt-{m}_{bb}_1xb64-{it}_{ds}.py' for m in 'lr' for bb in BACKBONES
                 for ds, it in length.items()}
    expected |= {f'irt-r_{bb}-pca128_1xb64-{it}_{ds}.py' for bb in ('deit-s', 'deit-s-dist')
                 for ds, it in length.items()}
    expected |= {f'table4/irt_{bb}_{loss}_1xb64-35k_sop.py' for bb in ('deit-s', 'r50')
                 for loss in ('nsoftmax', 'snca')}
    expected |= {f'table5/irt_{bb}_beta{b}-lambda{lam}_1xb64-35k_sop.py'
                 for bb in ('deit-s', 'r50') for b in ('0.1', '0.3', '0.5', '0.7', '0.9')
                 for lam in ('0.0', '0.3', '0.5', '0.7', '1.0')}
    expected |= {f'table9/irt-l_deit-s_{pool}_1xb64-{it}_{ds}.py'
                 for pool in ('avgpool', 'maxpool', 'gem') for ds, it in length.items()}
    assert expected <= shipped, sorted(expected - shipped)


@pytest.mark.parametrize('rel_path', CONFIGS)
def test_name_follows_rule(rel_path):
    if rel_path in SHORT_ALIASES:
        return
    parts = parse_name(rel_path)
    cfg = load(rel_path)
    train_parts = [cfg.get(k) for k in ('train_dataloader', 'train_cfg', 'optim_wrapper')]
    if parts['training'] is None:
        assert all(p is None for p in train_parts), \
            f'configs/{rel_path}: no training field in the name, but the config trains'
        return
    assert all(p is not None for p in train_parts), \
        f'configs/{rel_path}: the name has a training field, but the config does not train'
    procs_batch, *tags = parts['training'].split('-')
    assert cfg.train_dataloader.batch_size == int(procs_batch.split('xb')[1])
    for tag in tags:
        length = re.fullmatch(r'(\d+)(k?)', tag)
        if length:
            assert cfg.train_cfg.max_iters == int(length[1]) * (1000 if length[2] else 1)


def _flatten(items):
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flatten(item)
        elif item:
            yield item


def _dataloaders(cfg):
    """Every dataloader with a dataset (multi-dataset loops hold lists of them)."""
    loaders = [cfg.get(k) for k in ('train_dataloader', 'val_dataloader', 'test_dataloader')]
    loaders += [h.dataloader for h in cfg.get('custom_hooks') or [] if 'dataloader' in h]
    return [loader for loader in _flatten(loaders) if 'dataset' in loader]


@pytest.mark.parametrize('rel_path', CONFIGS)
def test_parts_are_registered(rel_path):
    """Types that need data to build are looked up; the evaluators are built."""
    cfg = load(rel_path)
    assert cfg.default_scope == 'irtbox'
    for loader in _dataloaders(cfg):
        assert DATASETS.get(loader.dataset.type), loader.dataset.type
        assert DATA_SAMPLERS.get(loader.sampler.type), loader.sampler.type
        for step in loader.dataset.pipeline:
            assert TRANSFORMS.get(step['type']), step['type']
    for key in ('val_evaluator', 'test_evaluator'):
        if cfg.get(key):
            for evaluator in _flatten([cfg[key]]):
                METRICS.build(copy.deepcopy(evaluator))
    hooks = list((cfg.get('default_hooks') or {}).values()) + list(cfg.get('custom_hooks') or [])
    for hook in hooks:
        assert HOOKS.get(hook['type']), hook['type']
    for key in ('train_cfg', 'val_cfg', 'test_cfg'):
        if cfg.get(key):
            assert LOOPS.get(cfg[key]['type']), cfg[key]['type']
    if cfg.get('optim_wrapper'):
        assert OPTIM_WRAPPERS.get(cfg.optim_wrapper.get('type', 'OptimWrapper'))
        assert OPTIMIZERS.get(cfg.optim_wrapper.optimizer.type)
    for scheduler in cfg.get('param_scheduler') or []:
        assert PARAM_SCHEDULERS.get(scheduler['type']), scheduler['type']


@pytest.mark.parametrize('rel_path', CONFIGS)
def test_best_checkpoint_rule_resolves(rel_path):
    """``save_best`` needs a comparison rule for our metric names: MMEngine infers one only for
    names it knows (acc, top, mAP, precision, ...), and ``'auto'`` picks the first metric the
    validation evaluator returns (e.g. ``recall@1``)."""
    cfg = load(rel_path)
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint')
    if not checkpoint or not checkpoint.get('save_best') or not cfg.get('val_evaluator'):
        return
    evaluator = cfg.val_evaluator
    metric = METRICS.build(copy.deepcopy(evaluator[0] if isinstance(evaluator, list) else evaluator))
    metric.process(None, [dict(embedding=torch.randn(8), gt_label=torch.tensor(i % 3),
                               sample_idx=i) for i in range(6)])
    names = [f'{metric.prefix}/{name}' if metric.prefix else name
             for name in metric.compute_metrics(metric.results)]
    hook = HOOKS.build(copy.deepcopy(checkpoint))
    keys = [names[0] if key == 'auto' else key for key in hook.key_indicators]
    assert set(keys) <= set(names), f'configs/{rel_path}: save_best={keys}, metrics {names}'
    # What MMEngine runs at the first validation; it raises when no rule can be inferred.
    hook._init_rule(hook.rules, keys)


_BACKBONE_OUTPUTS = {}


def pooled_dim(model, model_cfg):
    """Dimension of the pooled descriptor (before any PCA): the model's poolers run on the
    backbone output for one image (shapes only, on the meta device), computed once per
    distinct (preprocessor, backbone)."""
    poolers = [m for m in model.neck if not isinstance(m, PCAReduction)]
    key = repr((model_cfg.get('data_preprocessor'), model_cfg.backbone))
    model.eval()
    with torch.no_grad():
        if key not in _BACKBONE_OUTPUTS:
            patch_embed = getattr(model.backbone.model, 'patch_embed', None)
            size = tuple(patch_embed.img_size) if patch_embed is not None else (224, 224)
            # A normalised image, as the data preprocessor makes it (same shape).
            _BACKBONE_OUTPUTS[key] = model.backbone(torch.empty((1, 3) + size))
        features = _BACKBONE_OUTPUTS[key]
        for pooler in poolers:
            features = pooler(features)
    assert features.shape[0] == 1 and features.dim() == 2
    return features.shape[1]


@pytest.mark.slow
@pytest.mark.parametrize('rel_path', CONFIGS)
def test_model_builds(rel_path, timm_cache):
    """The model builds, and the descriptor has the dimension the PCA neck and the losses
    expect (in training the PCA neck passes the pooled descriptor through)."""
    model_cfg = copy.deepcopy(load(rel_path).model)
    model_cfg.backbone.pretrained = False
    # On the meta device: the modules and their shapes without drawing any weights (a ViT-B
    # takes 1.4 s to initialise, 0.1 s on meta); the forward below propagates shapes only.
    with DefaultScope.overwrite_default_scope('irtbox'), torch.device('meta'):
        model = MODELS.build(model_cfg)
        dim = pooled_dim(model, model_cfg)
    for neck in model.neck:
        if isinstance(neck, PCAReduction):
            assert neck.in_dim == dim
    for name, loss in loss_cfgs(model_cfg).items():
        if 'embed_dim' in loss:
            assert loss['embed_dim'] == dim, f'configs/{rel_path}: losses.{name}.embed_dim'


# ---------------------------------------------------------------- the IRT recipe


def _loader_steps(loader):
    return [step['type'] for step in loader.dataset.pipeline]


@pytest.mark.parametrize('rel_path', IRT_CONFIGS)
def test_irt_data(rel_path):
    parts = parse_name(rel_path)
    cfg = load(rel_path)
    ds = parts['dataset']
    for loader in _dataloaders(cfg):
        assert loader.dataset.type == DATASET_TYPE[ds]
        assert loader.dataset.data_root == f'data/{ds}'
    assert cfg.train_size == TRAIN_SIZE[ds]
    for loader in (cfg.val_dataloader, cfg.test_dataloader):
        assert loader.dataset.split == 'test'
        assert 'RandomCrop' not in _loader_steps(loader)
    if cfg.get('train_dataloader'):
        # Resize to 256 x 256, random 224 crop, horizontal flip; P x M batches of 64.
        steps = cfg.train_dataloader.dataset.pipeline
        assert steps[1]['type'] == 'Resize' and tuple(steps[1]['scale']) == (256, 256)
        assert steps[2] == dict(type='RandomCrop', crop_size=224)
        assert steps[3]['type'] == 'RandomFlip' and steps[3]['direction'] == 'horizontal'
        assert cfg.train_dataloader.batch_size == 64
        assert cfg.train_dataloader.sampler == dict(type='MPerClassSampler', batch_size=64, m=4,
                                                infinite=True)


@pytest.mark.parametrize('rel_path', IRT_CONFIGS)
def test_irt_recipe(rel_path):
    parts = parse_name(rel_path)
    cfg = load(rel_path)
    ds, method = parts['dataset'], parts['method']
    tag = parts['backbone'].replace('-pca128', '')
    model_name, dim, pooler = BACKBONES[tag]
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.model_name, backbone.pretrained) == (
        'TimmBackbone', model_name, True)
    if method == 'irt-o':
        assert cfg.model.head is None and cfg.get('train_dataloader') is None
        assert cfg.get('train_cfg') is None and cfg.get('optim_wrapper') is None
        assert cfg.model.neck == [dict(type='ClsTokenPool')]
        return
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.weight_decay) == ('AdamW', 3e-5, 5e-4)
    assert cfg.train_cfg.max_iters == MAX_ITERS[ds]
    assert cfg.model.get('momentum') == (0.999 if ds == 'inshop' else None)
    losses = loss_cfgs(cfg.model)
    if parts['setting'] in ('nsoftmax', 'snca'):
        return  # test_table4
    assert losses['contrastive'] == dict(
        type='ContrastiveLoss', margin=losses['contrastive']['margin'],
        memory_size=MEMORY_SIZE[ds], embed_dim=dim)
    if parts['setting'] is None or parts['setting'] in ('avgpool', 'maxpool', 'gem'):
        assert losses['contrastive']['margin'] == 0.5
        if method == 'irt-r':
            assert set(losses) == {'contrastive', 'koleo'}
            assert losses['koleo'] == dict(type='KoLeoLoss')
            assert dict(cfg.model.head.loss_weights) == dict(koleo=0.7)
        else:
            assert method == 'irt-l' and set(losses) == {'contrastive'}
    if parts['setting'] is None and '-pca128' not in parts['backbone']:
        assert cfg.model.neck == [dict(type=pooler)]


@pytest.mark.parametrize('rel_path', [c for c in IRT_MAIN if '-pca128' in c])
def test_irt_pca128(rel_path):
    cfg = load(rel_path)
    assert parse_name(rel_path)['method'] == 'irt-r'
    assert cfg.model.neck == [
        dict(type='ClsTokenPool'), dict(type='PCAReduction', in_dim=384, out_dim=128)]
    hooks = [h for h in cfg.custom_hooks if h['type'] == 'PCAFitHook']
    assert len(hooks) == 1
    # Learned on the training set, seen as at test time (no random augmentation).
    fit_loader = hooks[0].dataloader
    assert fit_loader.dataset.split == 'train'
    assert fit_loader.dataset.pipeline == cfg.test_dataloader.dataset.pipeline
    assert fit_loader.sampler == dict(type='DefaultSampler', shuffle=False)


TABLE5 = sorted(c for c in IRT_CONFIGS if c.startswith(osp.join('irt', 'table5', '')))


@pytest.mark.parametrize('rel_path', TABLE5)
def test_table5_values(rel_path):
    parts = parse_name(rel_path)
    beta, lam = (float(v) for v in re.fullmatch(r'beta([\d.]+)-lambda([\d.]+)',
                                                 parts['setting']).groups())
    cfg = load(rel_path)
    losses = loss_cfgs(cfg.model)
    assert parts['method'] == 'irt' and parts['dataset'] == 'sop'
    assert losses['contrastive']['margin'] == beta
    if lam == 0:
        assert set(losses) == {'contrastive'}  # λ = 0: no KoLeo term at all
    else:
        assert set(losses) == {'contrastive', 'koleo'}
        assert dict(cfg.model.head.loss_weights) == dict(koleo=lam)


@pytest.mark.parametrize('rel_path', sorted(c for c in IRT_CONFIGS if 'table9' in c))
def test_table9_poolers(rel_path):
    parts = parse_name(rel_path)
    expected = dict(avgpool=[dict(type='AvgPool')], maxpool=[dict(type='MaxPool')],
                    gem=[dict(type='GeMPool', p=3.0)])
    assert (parts['method'], parts['backbone']) == ('irt-l', 'deit-s')
    assert load(rel_path).model.neck == expected[parts['setting']]


@pytest.mark.parametrize('rel_path', sorted(c for c in IRT_CONFIGS if 'table4' in c))
def test_table4_losses(rel_path):
    parts = parse_name(rel_path)
    dim = BACKBONES[parts['backbone']][1]
    losses = loss_cfgs(load(rel_path).model)
    if parts['setting'] == 'nsoftmax':
        # One proxy per SOP training class (11,318), Zhai & Wu's temperature.
        assert losses == dict(nsoftmax=dict(type='NormalizedSoftmaxLoss', num_classes=11318,
                                            embed_dim=dim, temperature=0.05))
    else:
        assert parts['setting'] == 'snca'
        assert losses == dict(snca=dict(type='ScalableNCALoss', temperature=0.05,
                                        memory_size=MEMORY_SIZE['sop'], embed_dim=dim))


# ---------------------------------------------------------------- model zoo entries


@pytest.mark.slow
def test_metafile_lists_every_irt_config():
    import yaml
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        imports = yaml.safe_load(f)['Import']
    assert 'configs/irt/metafile.yml' in imports
    with open(osp.join(ROOT, 'configs', 'irt', 'metafile.yml')) as f:
        meta = yaml.safe_load(f)
    collections = {c['Name'] for c in meta['Collections']}
    listed = set()
    for entry in meta['Models']:
        assert entry['In Collection'] in collections
        # Only the untrained IRT_O entries have weights: the backbone's own (timm).
        if entry['Name'].startswith('irt-o_'):
            assert entry['Weights'] == dict(Source='timm',
                                            Pretrained='deit_small_patch16_224.fb_in1k')
        else:
            assert entry['Weights'] is None, entry['Name']
        assert entry['Name'] == osp.splitext(osp.basename(entry['Config']))[0]
        assert osp.isfile(osp.join(ROOT, entry['Config'])), entry['Config']
        for result in entry['Results']:
            assert result['Source'].startswith('paper'), entry['Name']
            assert result['Dataset'] in ('SOP', 'CUB-200-2011', 'In-Shop')
        listed.add(entry['Config'])
    assert len(listed) == len(meta['Models'])
    assert listed == {'configs/' + c.replace(os.sep, '/') for c in IRT_CONFIGS}


@pytest.mark.parametrize('rel_path', [c for c in CONFIGS if not c.startswith('quickstart')])
def test_training_configs_train_under_bf16_autocast_on_a_gpu(rel_path):
    """Issue 47 item 10: every family trains in bf16 autocast on GPUs with native bf16 and in
    float32 on CPUs (``enabled='auto'``), so CPU results do not change; the quick start is a
    CPU recipe and test-only configs train nothing."""
    cfg = load(rel_path)
    if cfg.get('train_dataloader') is None:
        return
    wrapper = cfg.optim_wrapper
    assert (wrapper.get('type'), wrapper.get('enabled')) == ('BF16AutocastOptimWrapper', 'auto')
