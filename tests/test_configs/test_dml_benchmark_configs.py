"""The training-recipe benchmark configs carry the paper's recipe, and every factor of the study
is a config key that takes effect.

Recipe facts (Berton, Musgrave & Masone; docs/methods/dml_benchmark.md): DINOv2 ViT-B/14, raw 768-d
CLS token, 224 x 224 resized inputs, RandAugment(3, 9) on training images, ImageNet normalisation;
Adam lr 1e-6, no weight decay, no schedule, bf16 autocast; classification losses' weights at lr 1.0
in their own group; PML 2.9's default loss hyper-parameters; batches of 256 with M images per
class: M = 4 and the multi-similarity miner (epsilon 0.1) for the contrastive losses, M = 1 (256
different classes) for the classification ones, which needs 256 training classes: CUB and Cars196
have fewer, Fig. 8 has no result for M <= 2 there, so M = 4; 80/20 class split of the training
classes (the first 80% of the sorted ids train); early stopping on validation Precision@1, patience
3 "epochs" of 390 batches, at most 100; test MAP@R and Precision@1. Training classes: CUB 100 and
Cars196 98 (docs/protocols.md), iNaturalist 2018 5,690 and SOP 11,318 (the paper's Table 2).

Models are built with the configs' own architecture cut to one block at 28 x 28 (random
weights): the parameter names, which decide the optimizer groups, are those of the full model.
Every config's full model is built by test_build_configs.py.
"""
import copy
import functools
import glob
import os.path as osp

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.miners import MultiSimilarityMiner

from irtbox.datasets.label_transforms import split_classes
from irtbox.models.losses.pml import PML_EQUIVALENTS
from irtbox.models.miners import PMLMiner
from irtbox.registry import DATA_SAMPLERS, DATASETS, METRICS, MODELS
from irtbox.cli.train import check_batch_sampler

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DML = osp.join(ROOT, 'configs', 'dml_benchmark')
CUB_FIXTURE = osp.join(ROOT, 'tests', 'data', 'cub')

# loss tag -> (PML class, family)
LOSSES = {
    'circle': ('CircleLoss', 'contrastive'),
    'contrastive': ('ContrastiveLoss', 'contrastive'),
    'multisimilarity': ('MultiSimilarityLoss', 'contrastive'),
    'ntxent': ('NTXentLoss', 'contrastive'),
    'snrcontrastive': ('SignalToNoiseRatioContrastiveLoss', 'contrastive'),
    'tcm': ('ThresholdConsistentMarginLoss', 'contrastive'),
    'tripletmargin': ('TripletMarginLoss', 'contrastive'),
    'arcface': ('ArcFaceLoss', 'classification'),
    'cosface': ('CosFaceLoss', 'classification'),
    'normsoftmax': ('NormalizedSoftmaxLoss', 'classification'),
    'proxyanchor': ('ProxyAnchorLoss', 'classification'),
    'softtriple': ('SoftTripleLoss', 'classification'),
}
BATCH = 256
# dataset tag -> (dataset type, data root, training classes, classes of the 80% training part)
DATASET_FACTS = {
    'cub': ('CUBDataset', 'data/cub', 100, 80),
    'cars196': ('Cars196Dataset', 'data/cars196', 98, 78),
    'inat2018': ('INaturalist2018Dataset', 'data/inat2018', 5690, 4552),
    'sop': ('SOPDataset', 'data/sop', 11318, 9054),
}
GRID = [(loss, dataset) for loss in LOSSES for dataset in DATASET_FACTS]
D128 = 'dml_dinov2-vit-b-d128_multisimilarity_1xb256-39k_cub.py'
MODEL_LR, CLASSIFIER_LR = 1e-6, 1.0
EPOCH_ITERS, MAX_EPOCHS = 390, 100
IMAGENET_MEAN, IMAGENET_STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]
# The configs' architecture, one block, 2 x 2 patches of 14 px, random weights.
SMALL_BACKBONE = {'model.backbone.pretrained': False, 'model.backbone.depth': 1,
                  'model.backbone.img_size': 28}


def images_per_class(family, dataset):
    """M = 4 for the contrastive losses; for the classification ones M = 1, or the smallest M of
    Fig. 8 whose batch needs no more classes than the training part has."""
    if family == 'contrastive':
        return 4
    return next(m for m in (1, 2, 4) if BATCH // m <= DATASET_FACTS[dataset][3])


def name(loss, dataset):
    return f'dml_dinov2-vit-b_{loss}_1xb256-39k_{dataset}.py'


@functools.lru_cache(maxsize=None)
def _load(file_name):
    return Config.fromfile(osp.join(DML, file_name))


def load(file_name, options=None):
    cfg = copy.deepcopy(_load(file_name))
    if options:
        cfg.merge_from_dict(options)
    return cfg


def build(registry, cfg, **kwargs):
    with DefaultScope.overwrite_default_scope('irtbox'):
        return registry.build(cfg, **kwargs)


def pipeline_steps(pipeline):
    return [step['type'] for step in pipeline]


# ---------------------------------------------------------------- the 12 x 4 grid


def test_grid_shipped():
    trained = {osp.basename(p) for p in glob.glob(osp.join(DML, 'dml_dinov2-vit-b*.py'))}
    assert trained == {name(loss, dataset) for loss, dataset in GRID} | {D128}


@pytest.mark.slow
def test_off_the_shelf_line_of_the_paper_grid():
    """The figures' horizontal line: a baseline config tested without training, i.e. the
    pretrained DINOv2 on the baseline's test set."""
    spec = Config.fromfile(osp.join(DML, 'sweeps', 'berton2023_figs4-10.py'))
    for dataset in DATASET_FACTS:
        path = spec.off_the_shelf.format(dataset=dataset)
        assert osp.dirname(path) == 'configs/dml_benchmark'
        assert osp.basename(path) in {name(loss, dataset) for loss in LOSSES}
        assert load(osp.basename(path)).model.backbone.pretrained is True


@pytest.mark.slow
@pytest.mark.parametrize('loss,dataset', GRID)
def test_loss(loss, dataset):
    """PML 2.9's defaults: only the class name plus the classifier's size (which the
    contrastive losses only check, so that the name alone switches the loss); the
    multi-similarity miner for exactly the contrastive ones."""
    pml_name, family = LOSSES[loss]
    metric = load(name(loss, dataset)).model.head.losses
    assert list(metric) == ['metric']
    metric = metric.metric
    num_classes = DATASET_FACTS[dataset][3]
    assert dict(metric) == dict(type='PMLLoss', name=pml_name, num_classes=num_classes,
                                embedding_size=768)  # miner: 'auto'
    built = build(MODELS, metric)
    # ArcFace and the normalised softmax: irtbox's formula in PML's form (test_pml_loss.py)
    assert isinstance(built.pml_loss, PML_EQUIVALENTS.get(pml_name, getattr(pml_losses, pml_name)))
    assert (built.num_classes, built.embedding_size) == (num_classes, 768)
    if family == 'contrastive':
        assert isinstance(built.miner, PMLMiner)
        assert isinstance(built.miner.pml_miner, MultiSimilarityMiner)
        assert built.miner.pml_miner.epsilon == pytest.approx(0.1)
        assert not any(True for _ in built.pml_loss.parameters())
    else:
        assert built.miner is None
        assert any(True for _ in built.pml_loss.parameters())


@pytest.mark.slow
@pytest.mark.parametrize('dataset', sorted(DATASET_FACTS))
def test_one_key_switches_the_loss(dataset):
    """From any baseline config, model.head.losses.metric.name=<PML class> builds that loss
    with the right classifier size (the rest of the recipe, e.g. M, stays)."""
    cfg = copy.deepcopy(load(name('multisimilarity', dataset)))
    for loss, (pml_name, family) in LOSSES.items():
        cfg.merge_from_dict({'model.head.losses.metric.name': pml_name})
        built = build(MODELS, cfg.model.head.losses.metric)
        assert isinstance(built.pml_loss,
                          PML_EQUIVALENTS.get(pml_name, getattr(pml_losses, pml_name)))
        if family == 'classification':
            weights = next(built.pml_loss.parameters())
            centres = 10 if pml_name == 'SoftTripleLoss' else 1  # PML's default per class
            assert weights.numel() == 768 * DATASET_FACTS[dataset][3] * centres
            assert 768 in weights.shape


@pytest.mark.parametrize('dataset', sorted(DATASET_FACTS))
def test_classifier_size_is_the_training_part(dataset):
    """The classifier covers the classes of the 80% part that BenchmarkSplitDataset trains on."""
    _, _, train_classes, part_classes = DATASET_FACTS[dataset]
    train, val = split_classes(train_classes, val_fraction=0.2)
    assert len(train) == part_classes
    assert len(val) == train_classes - part_classes


@pytest.mark.parametrize('loss,dataset', GRID)
def test_recipe(loss, dataset):
    family = LOSSES[loss][1]
    dataset_type, data_root, _, _ = DATASET_FACTS[dataset]
    cfg = load(name(loss, dataset))
    # Model: DINOv2 ViT-B/14 at 224, the raw CLS token, ImageNet normalisation.
    model = cfg.model
    assert model.type == 'ImageRetriever' and model.get('normalize', True)
    assert model.backbone == dict(type='TimmBackbone', model_name='vit_base_patch14_dinov2.lvd142m',
                                  pretrained=True, img_size=224)
    assert model.neck == [dict(type='ClsTokenPool'),
                          dict(type='LinearProjection', in_dim=768, out_dim=None)]
    preprocessor = model.data_preprocessor
    assert (preprocessor.mean, preprocessor.std) == (IMAGENET_MEAN, IMAGENET_STD)
    assert preprocessor.bgr_to_rgb
    # Optimiser: Adam 1e-6, no weight decay, no schedule, classifier 1.0, bf16 autocast if any.
    optim = cfg.optim_wrapper
    assert (optim.type, optim.enabled) == ('BF16AutocastOptimWrapper', 'auto')
    assert optim.optimizer == dict(type='Adam', lr=MODEL_LR, weight_decay=0.0)
    assert optim.paramwise_cfg == dict(custom_keys={'pml_loss': dict(lr=CLASSIFIER_LR)})
    assert not cfg.get('param_scheduler')
    # Data: batch 256, M per class, the 80/20 class split of the training split.
    train = cfg.train_dataloader
    assert train.batch_size == BATCH
    assert train.sampler == dict(type='MPerClassSampler', batch_size=BATCH,
                                 m=images_per_class(family, dataset), infinite=True)
    inner = dict(type=dataset_type, data_root=data_root, split='train')
    split = train.dataset
    assert split.type == 'BenchmarkSplitDataset' and split.dataset == inner
    assert (split.part, split.val_fraction, split.label_noise, split.class_fraction) == (
        'train', 0.2, 0.0, 1.0)
    val = cfg.val_dataloader.dataset
    assert val.type == 'BenchmarkSplitDataset' and val.dataset == inner
    assert (val.part, val.val_fraction) == ('val', 0.2)
    for part in (split, val):
        assert part.get('split_order', 'sorted') == 'sorted'
    test = cfg.test_dataloader.dataset
    assert (test.type, test.data_root, test.split) == (dataset_type, data_root, 'test')
    # Pipelines: 224 x 224 resize, aspect not kept; RandAugment(3, 9) for training only.
    assert pipeline_steps(split.pipeline) == [
        'LoadImageFromFile', 'Resize', 'RandAugment', 'PackRetrievalInputs']
    assert (split.pipeline[2].num_ops, split.pipeline[2].magnitude) == (3, 9)
    for pipeline in (split.pipeline, val.pipeline, test.pipeline):
        resize = pipeline[1]
        assert (resize.type, tuple(resize.scale), resize.keep_ratio) == (
            'Resize', (224, 224), False)
    for pipeline in (val.pipeline, test.pipeline):
        assert pipeline_steps(pipeline) == ['LoadImageFromFile', 'Resize', 'PackRetrievalInputs']
    # Schedule: validate every 390 iterations, at most 100 "epochs", early stopping.
    assert cfg.train_cfg == dict(type='IterBasedTrainLoop', max_iters=MAX_EPOCHS * EPOCH_ITERS,
                                 val_interval=EPOCH_ITERS)
    hooks = [h for h in cfg.custom_hooks if h.type == 'BestWeightsEarlyStoppingHook']
    assert len(hooks) == 1
    hook = hooks[0]
    assert (hook.monitor, hook.rule, hook.patience) == ('precision@1', 'greater', 3)
    assert hook.get('reload_best', True) and hook.get('min_delta', 0.0) == 0.0
    assert cfg.val_evaluator.type == cfg.test_evaluator.type == 'RetrievalMetric'


def toy_results():
    """The per-sample results RetrievalMetric.process stores, for 3 classes of 2 samples."""
    embeddings = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    return [dict(embedding=e, label=np.array(i // 2), sample_idx=i, is_query=False)
            for i, e in enumerate(embeddings)]


def test_evaluators_give_the_monitored_and_reported_metrics():
    cfg = load(name('multisimilarity', 'cub'))
    monitor = cfg.custom_hooks[0].monitor
    val_metrics = build(METRICS, cfg.val_evaluator).compute_metrics(toy_results())
    assert monitor in val_metrics, (
        f'the early-stopping hook monitors {monitor!r}; the validation metric gives '
        f'{sorted(val_metrics)}')
    test_metrics = build(METRICS, cfg.test_evaluator).compute_metrics(toy_results())
    assert {'map@r', 'precision@1'} <= set(test_metrics)


# ---------------------------------------------------------------- model and optimizer, built


def small_model(file_name, options=None):
    cfg = load(file_name, {**SMALL_BACKBONE, **(options or {})})
    return cfg, build(MODELS, cfg.model)


def group_settings(cfg, model):
    """{parameter name: (lr, weight decay)} in the optimizer the runner would build."""
    with DefaultScope.overwrite_default_scope('irtbox'):
        wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    assert type(wrapper).__name__ == 'BF16AutocastOptimWrapper'
    assert isinstance(wrapper.optimizer, torch.optim.Adam)
    group_of = {id(p): g for g in wrapper.optimizer.param_groups for p in g['params']}
    return {n: (group_of[id(p)]['lr'], group_of[id(p)]['weight_decay'])
            for n, p in model.named_parameters()}


def classifier_params(settings):
    return {n for n in settings if n.startswith('head.losses.metric.pml_loss.')}


@pytest.mark.slow
@pytest.mark.parametrize('options,model_lr,classifier_lr', [
    ({}, MODEL_LR, CLASSIFIER_LR),
    ({'optim_wrapper.optimizer.lr': 1e-5}, 1e-5, CLASSIFIER_LR),
    ({'optim_wrapper.paramwise_cfg.custom_keys.pml_loss.lr': 0.01}, MODEL_LR, 0.01),
])
def test_optimizer_groups(options, model_lr, classifier_lr):
    """Model at 1e-6, the classification loss's weights alone at 1.0, no weight decay; each
    lr is one --cfg-options key that leaves the other alone."""
    cfg, model = small_model(name('arcface', 'cub'), options)
    settings = group_settings(cfg, model)
    classifier = classifier_params(settings)
    assert classifier == {'head.losses.metric.pml_loss.W'}
    for param, (lr, weight_decay) in settings.items():
        expected = classifier_lr if param in classifier else model_lr
        assert lr == pytest.approx(expected, rel=1e-12), param
        assert weight_decay == 0.0, param
    assert any(p.startswith('backbone.model.blocks.0.') for p in settings)


@pytest.mark.slow
def test_optimizer_contrastive_has_no_classifier():
    cfg, model = small_model(name('multisimilarity', 'cub'))
    settings = group_settings(cfg, model)
    assert not classifier_params(settings)
    assert set(settings.values()) == {(MODEL_LR, 0.0)}


# ---------------------------------------------------------------- the factors of the study


def test_output_dimension_config():
    """Fig. 7's example config is the baseline plus the two output-dimension keys."""
    keys = {'model.neck.1.out_dim': 128, 'model.head.losses.metric.embedding_size': 128}
    cfg = load(D128)
    assert cfg.model.neck == [dict(type='ClsTokenPool'),
                              dict(type='LinearProjection', in_dim=768, out_dim=128)]
    assert cfg.model.head.losses.metric.embedding_size == 128
    assert cfg.model == load(name('multisimilarity', 'cub'), keys).model


@pytest.mark.slow
@pytest.mark.parametrize('loss', ['arcface', 'multisimilarity'])
def test_output_dimension_factor(loss):
    dim = 64
    _, model = small_model(name(loss, 'cub'), {
        'model.neck.1.out_dim': dim, 'model.head.losses.metric.embedding_size': dim})
    model.eval()
    with torch.no_grad():
        embeddings = model(torch.rand(3, 3, 28, 28) * 255, mode='tensor')
    assert embeddings.shape == (3, dim)
    torch.testing.assert_close(embeddings.norm(dim=1), torch.ones(3))
    metric = model.head.losses.metric
    loss_value = metric(torch.nn.functional.normalize(torch.randn(8, dim), dim=1),
                        torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))
    assert torch.isfinite(loss_value)
    with pytest.raises(ValueError, match=f'embedding_size={dim}'):
        metric(torch.randn(8, 768), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))


def test_no_miner_factor():
    cfg = load(name('multisimilarity', 'cub'), {'model.head.losses.metric.miner': None})
    assert build(MODELS, cfg.model.head.losses.metric).miner is None


def on_fixture(file_name, options=None):
    """The config with every loader on the CUB fixture (classes 1-5 train, 101-105 test);
    the training datasets unserialised (serialising runs a slow gc.collect())."""
    return load(file_name, {'train_dataloader.dataset.dataset.data_root': CUB_FIXTURE,
                            'val_dataloader.dataset.dataset.data_root': CUB_FIXTURE,
                            'test_dataloader.dataset.data_root': CUB_FIXTURE,
                            'train_dataloader.dataset.serialize_data': False,
                            'train_dataloader.dataset.dataset.serialize_data': False,
                            **(options or {})})


def fixture_train_part():
    """{class id: images} of the CUB fixture's training part, read from its files: classes
    1-100 are CUB's training split, of which the first 80% of the sorted ids train."""
    with open(osp.join(CUB_FIXTURE, 'image_class_labels.txt')) as f:
        ids = [int(line.split()[1]) for line in f if line.strip()]
    counts = {c: ids.count(c) for c in sorted(set(ids)) if c <= 100}
    kept = sorted(counts)[:len(counts) - int(round(0.2 * len(counts)))]
    return {c: counts[c] for c in kept}


def train_labels(cfg):
    return np.asarray(build(DATASETS, cfg.train_dataloader.dataset).get_gt_labels())


def first_batch(cfg):
    loader = cfg.train_dataloader
    dataset = build(DATASETS, loader.dataset)
    sampler = build(DATA_SAMPLERS, loader.sampler, default_args=dict(dataset=dataset, seed=0))
    indices = iter(sampler)
    batch = [next(indices) for _ in range(loader.batch_size)]
    return batch, np.asarray(dataset.get_gt_labels())[batch]


def test_label_noise_factor():
    part = fixture_train_part()
    file_name = name('multisimilarity', 'cub')
    clean = train_labels(on_fixture(file_name))
    noisy = train_labels(on_fixture(file_name, {'train_dataloader.dataset.label_noise': 0.5}))
    assert len(clean) == len(noisy) == sum(part.values())
    assert (clean != noisy).sum() == round(0.5 * len(clean))


def test_class_fraction_factor():
    part = fixture_train_part()
    cfg = on_fixture(name('arcface', 'cub'), {'train_dataloader.dataset.class_fraction': 0.5})
    dataset = build(DATASETS, cfg.train_dataloader.dataset)
    kept = dataset.metainfo['classes']
    assert len(kept) == round(0.5 * len(part)) and set(kept) <= set(part)
    assert sorted(set(dataset.get_gt_labels())) == list(range(len(kept)))
    assert len(dataset) == sum(part[c] for c in kept)


def test_seed_factor():
    """randomness.seed seeds the run; train_dataloader.dataset.seed the data draws."""
    kept = set()
    for seed in range(6):
        cfg = on_fixture(name('arcface', 'cub'), {
            'randomness.seed': seed, 'train_dataloader.dataset.seed': seed,
            'train_dataloader.dataset.class_fraction': 0.5})
        assert cfg.randomness.seed == seed
        dataset = build(DATASETS, cfg.train_dataloader.dataset)
        assert dataset.seed == seed
        kept.add(tuple(dataset.metainfo['classes']))
    assert len(kept) > 1


@pytest.mark.parametrize('m', [1, 2])
def test_images_per_class_factor(m):
    """M = 1: every image of a batch from a different class; M = 2: pairs."""
    batch_size = len(fixture_train_part())
    cfg = on_fixture(name('arcface', 'cub'), {
        'train_dataloader.batch_size': batch_size,
        'train_dataloader.sampler.batch_size': batch_size, 'train_dataloader.sampler.m': m})
    check_batch_sampler(cfg)
    batch, labels = first_batch(cfg)
    assert len(set(batch)) == batch_size
    assert sorted(np.unique(labels, return_counts=True)[1]) == [m] * (batch_size // m)


def test_batch_size_factor():
    """The two batch-size keys go together; the recipe's M = 4 stays."""
    m = images_per_class('contrastive', 'cub')
    batch_size = 2 * m
    file_name = name('multisimilarity', 'cub')
    cfg = on_fixture(file_name, {'train_dataloader.batch_size': batch_size,
                                 'train_dataloader.sampler.batch_size': batch_size})
    check_batch_sampler(cfg)
    batch, labels = first_batch(cfg)
    assert len(batch) == batch_size
    assert sorted(np.unique(labels, return_counts=True)[1]) == [m] * (batch_size // m)
    with pytest.raises(SystemExit, match=f'sampler.batch_size={BATCH} differs'):
        check_batch_sampler(on_fixture(file_name, {'train_dataloader.batch_size': batch_size}))
