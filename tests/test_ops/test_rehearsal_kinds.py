"""Kinds of configs: what tells two configs' rehearsals apart, and CI rehearsing every kind the
shipped configs hold."""
import copy
import os.path as osp
import re

import pytest
from mmengine.config import Config

from irtbox.ops.miniaturize import loader_cfgs
from irtbox.ops.rehearsal_kinds import config_kind, rehearsal_set, shipped_configs
from irtbox.cli.rehearse import main as rehearse_main
from irtbox.ops.miniature import miniature_kinds

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


def variant(change, tiny=Config.fromfile(TINY)):
    cfg = copy.deepcopy(tiny)
    change(cfg)
    return config_kind(cfg)


@pytest.mark.slow
def test_a_kind_changes_with_each_part_and_not_with_numbers():
    base = variant(lambda cfg: None)
    assert base.backbone == 'VisionTransformer(pos_embed=timm)'
    assert base.necks == ('ClsTokenPool', ) and base.losses == ('ContrastiveLoss', 'KoLeoLoss')
    assert (base.sampler, base.loop) == ('MPerClassSampler', 'IterBasedTrainLoop')

    def numbers(cfg):
        cfg.model.head.loss_weights.koleo = 3.0
        cfg.train_dataloader.batch_size = 64
        cfg.optim_wrapper.optimizer.lr = 1.0
    assert variant(numbers) == base

    def arcface_partial_fc(cfg):
        cfg.model.head.losses = dict(arcface=dict(type='ArcFaceLoss', num_classes=5,
                                                  embed_dim=32, partial_fc=dict(sample_rate=1)))
    parts = {
        'backbone': lambda cfg: cfg.model.backbone.update(pos_embed='none'),
        'necks': lambda cfg: cfg.model.neck.append(dict(type='PCAReduction', in_dim=32,
                                                        out_dim=4)),
        'losses': arcface_partial_fc,
        'hooks': lambda cfg: cfg.update(custom_hooks=[dict(type='PCAFitHook',
                                                           dataloader=cfg.val_dataloader)]),
        'sampler': lambda cfg: cfg.train_dataloader.sampler.update(m=1),
        'validates': lambda cfg: cfg.update(val_dataloader=None, val_cfg=None,
                                            val_evaluator=None),
        'optim_wrapper': lambda cfg: cfg.optim_wrapper.update(type='BF16AutocastOptimWrapper'),
        'datasets': lambda cfg: cfg.val_dataloader.update(dataset=dict(
            type='CUBDataset', data_root='data/cub')),
    }
    for field, change in parts.items():
        kind = variant(change)
        differ = [f for f in kind.__dataclass_fields__ if getattr(kind, f) != getattr(base, f)]
        assert differ == [field], (field, kind.describe())
    assert variant(arcface_partial_fc).losses == ('ArcFaceLoss+PartialFC', )
    assert variant(parts['sampler']).sampler == 'MPerClassSampler(m=1)'


@pytest.mark.slow
def test_every_kind_of_the_shipped_configs_is_rehearsed_in_ci(shipped_configs_parsed_once):
    """CI runs ``--all-kinds --quick`` on 2 processes, which rehearses the cheapest config of each
    kind; this fails when a shipped config brings a kind that set leaves out, or one that no
    rehearsal can run (a dataset without a miniature, a backbone the rehearsal cannot scale)."""
    with open(osp.join(ROOT, '.ci', 'run')) as f:
        ci = f.read()
    step = re.search(r'^[^#\n]*rehearse\.py --all-kinds --quick.*$', ci, re.M)
    assert step, '.ci/run must rehearse every kind'
    assert '--nproc 1' not in step.group(), '.ci/run must rehearse every kind on 2 processes'
    cfgs = shipped_configs()
    assert len(cfgs) > 200
    chosen = dict(rehearsal_set(cfgs))
    missing = sorted(osp.relpath(p, ROOT) for p, cfg in cfgs.items()
                     if config_kind(cfg) not in chosen)
    assert not missing, f'kinds no rehearsal covers: {missing}'
    for kind, path in chosen.items():
        cfg = cfgs[path]
        assert config_kind(cfg) == kind
        assert cfg.model.backbone.type == 'TimmBackbone', path
        for where, loader in loader_cfgs(copy.deepcopy(cfg)):
            if isinstance(loader.get('dataset'), dict):
                assert miniature_kinds(loader['dataset']), f'{path}: {where}: no miniature'


def test_the_cheapest_config_of_a_kind_is_chosen():
    """DeiT-B and DeiT-S IRT_R on SOP are one kind (one architecture class, the same parts);
    the smaller model is rehearsed, though DeiT-B comes first by name."""
    paths = [osp.join(ROOT, 'configs', 'irt', f'irt-r_deit-{size}_1xb64-35k_sop.py')
             for size in ('b', 's')]
    cfgs = {path: Config.fromfile(path) for path in paths}
    assert config_kind(cfgs[paths[0]]) == config_kind(cfgs[paths[1]])
    assert [path for _, path in rehearsal_set(cfgs)] == [paths[1]]


@pytest.mark.parametrize('argv, message', [
    ([], 'give a config or --all-kinds'),
    (['x.py', '--all-kinds'], 'give a config or --all-kinds'),
    (['x.py', '--list'], '--list, --only and --jobs only with --all-kinds'),
    (['x.py', '--quick', '--kinds-per-session', '3'],
     '--kinds-per-session only with --all-kinds --quick'),
    (['--all-kinds', '--kinds-per-session', '3'],
     '--kinds-per-session only with --all-kinds --quick'),
    (['--all-kinds', '--jobs', '0'], 'argument --jobs: the value must be a positive integer, '
                                     'got 0'),
])
def test_command_line_refusals(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        rehearse_main(argv)
    assert message in f'{stop.value.code} {capsys.readouterr().err}'
    assert stop.value.code != 0
