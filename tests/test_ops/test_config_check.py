"""Every config key is checked against the part it configures (irtbox.ops.config_check) when
a command loads the config, before any work: a misspelled argument names the config file, the
key path and the closest valid key instead of a bare TypeError at build time."""
import glob
import os
import os.path as osp

import pytest

from irtbox.apis import load_run_config
from irtbox.ops.config_check import accepted_keys, check_config_keys
from irtbox.cli import train as train_tool
from irtbox.utils.config import ConfigError, load_config
from tests.test_reliability.reliability_helpers import ROOT, TINY_CONFIG



@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No hub access from these tests (and none left switched off for the tests after them)."""
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')


@pytest.mark.slow
@pytest.mark.parametrize('key, value, cls, meant', [
    ('default_hooks.checkpoint.intervall', 1, 'CheckpointHook', 'interval'),
    ('default_hooks.logger.intrval', 1, 'LoggerHook', 'interval'),
    ('default_hooks.non_finite_loss.max_skiped', 1, 'NonFiniteLossHook', 'max_skipped'),
    ('model.head.loss_weigths', {}, 'EmbeddingHead', 'loss_weights'),
    ('model.head.losses.contrastive.margn', 0.5, 'ContrastiveLoss', 'margin'),
    ('model.data_preprocessor.meen', [0, 0, 0], 'ImgDataPreprocessor', 'mean'),
    ('train_dataloader.dataset.pipeline.1.scal', 32, 'Resize', 'scale'),
    ('train_dataloader.sampler.mm', 2, 'MPerClassSampler', 'm'),
    ('train_dataloader.batch_sise', 4, 'the dataloader', 'batch_size'),
    ('optim_wrapper.optimizer.lrr', 0.1, 'AdamW', 'lr'),
    ('val_evaluator.kss', [1], 'RetrievalMetric', 'ks'),
    ('val_evaluator.search.devic', dict(type='ExactSearcher', devic='cpu'), 'ExactSearcher',
     'device'),
    ('val_cfg.fp61', True, 'ValLoop', 'fp16'),
])
def test_misspelled_key_anywhere(key, value, cls, meant):
    # Before: loaded fine; the build (or, for the checkpoint hook, the first save after the
    # whole training) failed with "__init__() got an unexpected keyword argument".
    # ``key`` is the path reported; a list or dict value is set at its first parts.
    option = key.split('.0.')[0] if isinstance(value, list) else key
    option = option.rsplit('.', 1)[0] if isinstance(value, dict) and 'type' in value else option
    typo = key.split('.')[-1]
    with pytest.raises(ConfigError) as err:
        check_config_keys(load_run_config(TINY_CONFIG, {option: value}, work_dir='unused'))
    assert str(err.value).startswith(
        f"{TINY_CONFIG}: {key}: {cls}")
    assert f"takes no argument {typo!r}; did you mean '{meant}'?" in str(err.value)


@pytest.mark.slow
def test_hook_typo_refused_before_training(tmp_path):
    work_dir = tmp_path / 'w'
    with pytest.raises(ConfigError, match=r"default_hooks\.checkpoint\.intervall: CheckpointHook "
                       r"takes no argument 'intervall'; did you mean 'interval'"):
        train_tool.main([TINY_CONFIG, '--work-dir', str(work_dir), '--cfg-options',
                         'default_hooks.checkpoint.intervall=1'])
    assert not work_dir.exists()  # nothing ran


@pytest.mark.parametrize('option, expected', [
    ('optim_wrapper.optimizer.lr=-1',
     'optim_wrapper.optimizer.lr: expected a learning rate: a number >= 0, got -1'),
    ('train_cfg.max_iters=2.5', 'train_cfg.max_iters: expected a whole number >= 1, got 2.5'),
    ('train_cfg.val_interval=0', 'train_cfg.val_interval: expected a whole number >= 1, got 0'),
])
def test_values_that_were_raw_asserts(option, expected, tmp_path):
    with pytest.raises(ConfigError, match=expected) as err:
        train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path), '--cfg-options', option])
    assert str(err.value).startswith(TINY_CONFIG)


@pytest.mark.parametrize('key, value, registry, built', [
    # Every dataset passes its **kwargs on; so does MMEngine's LinearLR (its mixin).
    ('train_dataloader.dataset.data_rot', 'x', 'DATASETS', None),
    ('param_scheduler', [dict(type='LinearLR', start_factr=0.1)], 'PARAM_SCHEDULERS',
     'optimizer'),
])
def test_a_key_behind_kwargs_is_left_to_the_build(key, value, registry, built):
    """Where ``**kwargs`` go only the build knows (no constructor's source is read): the check
    passes such a key, and the build (the runner's, before the first iteration; a rehearsal's
    in miniature) names it."""
    import torch

    import irtbox.registry
    cfg = load_run_config(TINY_CONFIG, {key: value}, work_dir='unused')
    check_config_keys(cfg)
    part = dict(cfg.train_dataloader.dataset) if built is None else dict(cfg.param_scheduler[0])
    if built:
        part['optimizer'] = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    typo = key.rsplit('.', 1)[-1] if built is None else 'start_factr'
    with pytest.raises(TypeError, match=typo):
        getattr(irtbox.registry, registry).build(part)


def test_kwargs_left_unchecked():
    class Base:
        def __init__(self, a=1, b: int = 2):
            pass

    class Forwards(Base):
        def __init__(self, c=3, **kwargs):
            kwargs.pop('d', None)
            super().__init__(**kwargs)

    class Keeps(Base):
        def __init__(self, c=3, **kwargs):
            self.extra = kwargs  # where they go is not known: not checked

    assert accepted_keys(Forwards) is None  # passed on or kept: the signature does not say
    assert accepted_keys(Keeps) is None
    assert accepted_keys(Base) == {'a', 'b'}


def test_own_part_with_unknown_kwargs_destination_passes(tmp_path):
    config = tmp_path / 'own.py'
    config.write_text(f"_base_ = ['{TINY_CONFIG}']\n"
                      "model = dict(backbone=dict(drop_path_rate=0.1))\n"
                      "default_hooks = dict(checkpoint=dict(save_last=False))\n")
    check_config_keys(load_config(str(config)))


SHIPPED = sorted(
    p for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'), recursive=True)
    if not {'_base_', 'sweeps'} & set(osp.relpath(p, ROOT).split(os.sep)))
TEST_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'tests', 'data', 'configs', '*.py')))


def one_per_folder(paths):
    """The first config of each folder: the folders differ in schedules, hooks and parts;
    loading all ~220 takes a minute (IRTBOX_CHECK_ALL_CONFIGS=1 checks every one)."""
    if os.environ.get('IRTBOX_CHECK_ALL_CONFIGS'):
        return paths
    seen = {}
    for path in paths:
        seen.setdefault(osp.dirname(path), path)
    return sorted(seen.values())


@pytest.mark.slow
def test_shipped_configs_pass():
    chosen = one_per_folder(SHIPPED) + TEST_CONFIGS
    assert len(chosen) > 10
    failures = []
    for path in chosen:
        try:
            check_config_keys(load_config(path), path)
        except ConfigError as err:
            failures.append(str(err))
    assert not failures, '\n'.join(failures)


@pytest.mark.parametrize('option, expected', [
    # Before: "sampler.batch_size=64 differs from train_dataloader.batch_size=64".
    ("train_dataloader.batch_size='4'",
     "train_dataloader.batch_size: expected a whole number >= 1, got '4'"),
    # Before: TypeError in CheckpointHook after the environment and config dump.
    ('default_hooks.checkpoint.max_keep_ckpts=1.5',
     'default_hooks.checkpoint.max_keep_ckpts: expected a whole number, got 1.5'),
    # Before: IndexError after the dump.
    ('optim_wrapper.optimizer.betas=(0.9,)',
     r'optim_wrapper.optimizer.betas: expected two numbers \(b1, b2\), got \(0.9,\)'),
    ('train_dataloader.num_workers=-1',
     'train_dataloader.num_workers: expected a whole number >= 0, got -1'),
])
def test_well_known_values_are_checked_by_key(option, expected):
    key, value = option.split('=', 1)
    cfg = load_run_config(TINY_CONFIG, work_dir='unused')
    node = cfg
    *parents, last = key.split('.')
    for part in parents:
        node = node[part]
    node[last] = eval(value)
    with pytest.raises(ConfigError, match=f'{TINY_CONFIG}: {expected}$'):
        check_config_keys(cfg)
