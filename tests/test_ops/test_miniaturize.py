"""What a rehearsal changes in a config, and only that."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from irtbox.ops.miniaturize import (_built_dataset, fit_classifiers, miniaturize,
                                    point_datasets, scale_input_size, shallow_backbone,
                                    shorten_schedule, shrink_loaders, shrink_projections,
                                    stand_in_weights, force_autocast)
from irtbox.datasets.samplers import get_dataset_labels
from irtbox.registry import MODELS
from irtbox.utils.checkpoint import state_digest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
IRT_SOP = osp.join(ROOT, 'configs', 'irt', 'irt-r_deit-s_1xb64-35k_sop.py')
DTOP = osp.join(ROOT, 'configs', 'dtop', 'r50vitb_sfm.py')
DML = osp.join(ROOT, 'configs', 'dml_benchmark',
               'dml_dinov2-vit-b_contrastive_1xb256-39k_cub.py')
DML_M1 = osp.join(ROOT, 'configs', 'dml_benchmark', 'dml_dinov2-vit-b_arcface_1xb256-39k_sop.py')
IRT_SOP_PCA = osp.join(ROOT, 'configs', 'irt', 'irt-r_deit-s-pca128_1xb64-35k_sop.py')
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
DIGITS = osp.join(ROOT, 'configs', 'dml_benchmark', 'digits',
                  'dml_vit-tiny_normsoftmax_1xb40-320_digits.py')


def sizes(pipeline):
    return [(t['type'], t.get('scale', t.get('crop_size', t.get('sizes'))))
            for t in pipeline if t['type'] not in ('LoadImageFromFile', 'PackRetrievalInputs')]


@pytest.mark.slow
def test_fixed_size_vit_gets_the_small_input_and_the_pipelines_follow():
    cfg = Config.fromfile(IRT_SOP)
    scale_input_size(cfg, 64)
    assert cfg.model.backbone.img_size == 64
    # 256 -> 224 crop, scaled by 64 / 224.
    assert sizes(cfg.train_dataloader.dataset.pipeline)[:2] == [
        ('Resize', (73, 73)), ('RandomCrop', 64)]
    assert sizes(cfg.test_dataloader.dataset.pipeline) == [('Resize', (73, 73)),
                                                           ('CenterCrop', 64)]


@pytest.mark.slow
def test_patch_14_rounds_to_a_multiple_of_the_patch():
    cfg = Config.fromfile(DML)
    scale_input_size(cfg, 64)
    assert cfg.model.backbone.img_size == 70  # 5 patches of 14
    assert sizes(cfg.val_dataloader.dataset.pipeline) == [('Resize', (70, 70))]


@pytest.mark.slow
def test_dynamic_position_embedding_keeps_its_grid_and_group_sizes_scale():
    cfg = Config.fromfile(DTOP)
    scale_input_size(cfg, 64)
    assert 'img_size' not in cfg.model.backbone  # any input size: the grid stays native
    group = [t for t in cfg.train_dataloader.dataset.pipeline if t['type'] == 'GroupResize'][0]
    # Yokoo et al.'s (512, 352) ... (352, 512), by 64 / 384 (the model's native side).
    assert [tuple(s) for s in group['sizes']][0] == (85, 59)
    whiten = cfg.custom_hooks[0].dataloader.dataset.pipeline
    assert ('Resize', (85, 85)) in sizes(whiten)


def test_schedule_two_phases_with_every_interval_short():
    cfg = Config.fromfile(IRT_SOP)
    first = shorten_schedule(cfg, units=3)
    assert first == {'train_cfg.max_iters': '3'}
    assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval) == (6, 3)
    assert cfg.default_hooks.checkpoint.interval == 3
    assert cfg.default_hooks.checkpoint.max_keep_ckpts == -1
    epochs = Config.fromfile(DTOP)
    assert shorten_schedule(epochs, units=3) == {'train_cfg.max_epochs': '1'}
    assert epochs.train_cfg.max_epochs == 2
    assert epochs.default_hooks.checkpoint.interval == 1


def test_loaders_shrink_but_keep_two_classes_per_batch(tmp_path):
    cfg = Config.fromfile(IRT_SOP)
    point_datasets(cfg, str(tmp_path))
    assert shrink_loaders(cfg, batch_size=4, workers=0) == []
    train = cfg.train_dataloader
    assert train.batch_size == train.sampler.batch_size == 8  # m = 4: two classes
    assert train.num_workers == 0 and train.persistent_workers is False
    assert cfg.test_dataloader.batch_size == 4


def test_one_image_per_class_batches_hold_the_classes_the_data_has(tmp_path):
    """m = 1: a batch of 8 needs 8 classes; the miniature's class-disjoint training split
    holds fewer, so the batch is sized from them, and the sampler accepts it."""
    from irtbox.datasets.samplers import MPerClassSampler
    cfg = Config.fromfile(DML_M1)
    point_datasets(cfg, str(tmp_path))
    notes = shrink_loaders(cfg, batch_size=8, workers=0)
    train = cfg.train_dataloader
    dataset = _built_dataset(train)
    classes = len(set(get_dataset_labels(dataset).tolist()))
    assert 2 <= classes < 8
    assert train.batch_size == train.sampler.batch_size == classes
    assert notes == [f'train_dataloader: batches of {classes} classes x 1 (the data holds '
                     f'{classes} classes)']
    MPerClassSampler(dataset, batch_size=train.batch_size, m=1, seed=0, rank=0, world_size=1)


def test_a_loader_two_entries_share_is_scaled_once_and_pca_fits_its_data(tmp_path):
    """The PCA hook's loader is the config's train_eval_dataloader itself: scaled once, like
    every other loader; its PCA keeps no more components than that loader has images."""
    cfg = Config.fromfile(IRT_SOP_PCA)
    hook = [h for h in cfg.custom_hooks if h.type == 'PCAFitHook'][0]
    assert hook.dataloader is cfg.train_eval_dataloader
    point_datasets(cfg, str(tmp_path))
    scale_input_size(cfg, 64)
    assert sizes(hook.dataloader.dataset.pipeline) == sizes(cfg.test_dataloader.dataset.pipeline)
    images = len(_built_dataset(hook.dataloader))
    assert images < 128
    assert shrink_projections(cfg) == [f'PCAReduction out_dim 128 -> {images} (the descriptors '
                                       'its fit hook sees)']
    assert cfg.model.neck[-1].out_dim == images


def test_a_classifier_covers_the_training_classes_of_the_miniature(tmp_path):
    """The digits configs' classifier has the 5 classes that train on the real data (digits
    0-4); the CSV miniature's training part holds 6, so a batch that drew the 6th failed with
    'labels must lie in [0, 5)' on whichever rank drew it (issue 47: rank 1 of a 2-process quick
    rehearsal). The miniature's classifier covers its classes; a larger one is kept."""
    cfg = Config.fromfile(DIGITS)
    point_datasets(cfg, str(tmp_path))
    classes = int(get_dataset_labels(_built_dataset(cfg.train_dataloader)).max()) + 1
    assert classes == 6 and cfg.model.head.losses.metric.num_classes == 5
    assert fit_classifiers(cfg) == ["PMLLoss num_classes 5 -> 6 (the miniature's training classes)"]
    assert cfg.model.head.losses.metric.num_classes == 6
    sop = Config.fromfile(IRT_SOP)
    point_datasets(sop, str(tmp_path / 'sop'))
    before = sop.model.head.to_dict()
    assert fit_classifiers(sop) == [] and sop.model.head.to_dict() == before


@pytest.mark.slow
def test_uncached_pretrained_weights_get_a_stand_in_of_known_values(tmp_path, monkeypatch):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(tmp_path / 'empty'))
    cfg = Config.fromfile(TINY)
    cfg.model.backbone.pretrained = True
    note = stand_in_weights(cfg, str(tmp_path / 'weights'))
    assert 'stand-in' in note
    backbone = cfg.model.backbone
    assert backbone.pretrained is False and osp.isfile(backbone.checkpoint)
    saved = torch.load(backbone.checkpoint, weights_only=True)
    built = MODELS.build(backbone)
    assert state_digest(built.model.state_dict()) == state_digest(saved)


def test_cached_pretrained_weights_are_used(tmp_path, monkeypatch):
    from tests.test_models.test_backbones.test_pretrained_weights import HUB_NAME, TINY as KW
    from tests.test_models.test_backbones.test_pretrained_weights import hub_cache
    hub_cache(tmp_path, monkeypatch, **KW)
    monkeypatch.setattr('huggingface_hub.constants.HF_HUB_OFFLINE', False)
    cfg = Config(dict(model=dict(backbone=dict(type='TimmBackbone', model_name=HUB_NAME,
                                               pretrained=True, **KW))))
    assert 'from the cache' in stand_in_weights(cfg, str(tmp_path / 'weights'))
    assert cfg.model.backbone.pretrained is True


@pytest.mark.slow
def test_miniaturize_writes_data_and_runs_under_the_work_dir(tmp_path):
    cfg, first, notes = miniaturize(Config.fromfile(IRT_SOP), str(tmp_path))
    assert cfg.work_dir == str(tmp_path / 'run')
    assert first == {'train_cfg.max_iters': '2'}
    root = cfg.train_dataloader.dataset.data_root
    assert root == cfg.test_dataloader.dataset.data_root == str(tmp_path / 'data' / 'sop')
    assert osp.isfile(osp.join(root, 'Ebay_train.txt'))
    assert any('stand-in' in n for n in notes)
    # The model, losses and hooks are the config's own.
    original = Config.fromfile(IRT_SOP)
    assert cfg.model.head == original.model.head and cfg.model.neck == original.model.neck


def test_a_quick_rehearsal_keeps_the_blocks_the_outputs_need():
    irt, dtop, r50 = (Config.fromfile(p) for p in (
        IRT_SOP, DTOP, osp.join(ROOT, 'configs', 'irt', 'irt-r_r50_1xb64-35k_sop.py')))
    assert shallow_backbone(irt) == 'backbone depth 12 -> 2 blocks (quick)'
    assert shallow_backbone(dtop) == 'backbone depth 12 -> 6 blocks (quick)'  # the last six
    assert dtop.model.backbone.depth == 6
    assert shallow_backbone(r50) is None and 'depth' not in r50.model.backbone


def test_the_optimizer_wrappers_autocast_is_forced_on_as_on_a_gpu():
    """IRT's configs train under BF16AutocastOptimWrapper(enabled='auto'): float32 on a CPU, so a
    rehearsal on CPU never ran the bf16 step a GPU run takes unless it turns autocast on."""
    irt = Config.fromfile(IRT_SOP)
    assert irt.optim_wrapper.type == 'BF16AutocastOptimWrapper'
    assert force_autocast(irt) and irt.optim_wrapper.enabled is True
    off = Config.fromfile(IRT_SOP)
    off.optim_wrapper.enabled = False  # the user's own choice: a GPU run keeps float32 too
    assert force_autocast(off) is None and off.optim_wrapper.enabled is False
    plain = Config.fromfile(TINY)
    plain.optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1))
    assert force_autocast(plain) is None and 'enabled' not in plain.optim_wrapper
