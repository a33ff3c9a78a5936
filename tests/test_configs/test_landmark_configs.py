"""The particular-object IRT configs carry the paper's recipe (IRT Sec. 4.1, Tables 6-8).

The values asserted are facts stated in the paper (Adam 5e-7, wd 1e-6, margin 0.85, 100 epochs,
5 tuples per batch, 2,000 pairs, a 22,000-image pool, 5 negatives, GeM p = 3), not numbers
computed from the code.
"""
import glob
import os.path as osp

import pytest
from mmengine.config import Config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
LANDMARKS = sorted(glob.glob(osp.join(ROOT, 'configs', 'irt', 'landmarks', '*.py')))
TABLE6 = {'irt-l_deit-s_1xb5-100e_sfm120k.py': 0.0, 'irt-r_deit-s_lambda1.0_1xb5-100e_sfm120k.py': 1.0,
          'irt-r_deit-s_lambda2.0_1xb5-100e_sfm120k.py': 2.0,
          'irt-r_deit-s_lambda3.0_1xb5-100e_sfm120k.py': 3.0,
          'irt-r_deit-s_1xb5-100e_sfm120k.py': 4.0, 'irt-r_deit-s_lambda5.0_1xb5-100e_sfm120k.py': 5.0}


@pytest.mark.parametrize('path', LANDMARKS, ids=osp.basename)
def test_recipe(path):
    cfg = Config.fromfile(path)
    assert cfg.optim_wrapper.optimizer == dict(type='Adam', lr=5e-7, weight_decay=1e-6)
    assert cfg.train_cfg.max_epochs == 100
    loader = cfg.train_dataloader
    assert loader.batch_size == 5 and loader.collate_fn.type == 'tuple_collate'
    assert (loader.dataset.qsize, loader.dataset.nnum, loader.dataset.tuples) == (2000, 5, True)
    mining = [h for h in cfg.custom_hooks if h.type == 'TupleMiningHook']
    assert len(mining) == 1 and mining[0].poolsize == 22000
    assert cfg.model.head.losses.tuple == dict(type='TupleContrastiveLoss', margin=0.85,
                                               num_negatives=5)
    size = 384 if '-384' in osp.basename(path) else 224
    for pipeline in (loader.dataset.pipeline, cfg.test_dataloader[0].dataset.pipeline):
        assert dict(type='Resize', scale=(size, size), keep_ratio=False) in pipeline
    assert [d.dataset.dataset_name for d in cfg.test_dataloader] == ['roxford5k', 'rparis6k']
    assert cfg.test_dataloader[0].dataset.pipeline[1] == dict(type='CropBBox')  # crop, then resize
    if '-pca128' in path:
        assert cfg.model.neck[-1].out_dim == 128
        assert any(h.type == 'PCAFitHook' for h in cfg.custom_hooks)
    if '-gem' in path:
        assert cfg.model.neck[0] == dict(type='GeMPool', p=3.0)
        assert cfg.optim_wrapper.paramwise_cfg.custom_keys['neck.0.p'] == dict(lr_mult=10.0,
                                                                               decay_mult=0.0)


@pytest.mark.parametrize('name,lam', sorted(TABLE6.items()))
def test_table6_lambdas(name, lam):
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'irt', 'landmarks', name))
    weights = cfg.model.head.get('loss_weights') or {}
    if lam == 0.0:
        assert 'koleo' not in cfg.model.head.losses
    else:
        assert weights['koleo'] == lam


@pytest.mark.slow
def test_metafile_lists_every_landmark_config():
    import yaml
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        assert 'configs/irt/landmarks/metafile.yml' in yaml.safe_load(f)['Import']
    with open(osp.join(ROOT, 'configs', 'irt', 'landmarks', 'metafile.yml')) as f:
        meta = yaml.safe_load(f)
    listed = {m['Config'] for m in meta['Models']}
    assert listed == {osp.relpath(p, ROOT).replace(osp.sep, '/') for p in LANDMARKS}
    for m in meta['Models']:
        assert osp.isfile(osp.join(ROOT, m['Config'])) and m['Weights'] is None


@pytest.mark.slow
def test_a_pca128_config_trains_its_first_epoch(tmp_path, monkeypatch):
    """IRT ▷128 mines its first tuples before anything has fitted the PCA (it is learned after
    training): the config's first epoch on the landmark miniature, then the PCA fitted for the
    checkpoint."""
    from irtbox.ops.miniaturize import miniaturize
    from irtbox.cli import train as train_tool
    from irtbox.utils.checkpoint import safe_torch_load
    from irtbox.utils.config import load_config
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')  # the backbone gets a local stand-in
    name = 'irt-l_deit-s-dist-pca128_1xb5-100e_sfm120k.py'
    cfg, _, _ = miniaturize(load_config(osp.join(ROOT, 'configs', 'irt', 'landmarks', name)),
                            str(tmp_path), input_size=32, shallow=True)  # 2 blocks: seconds
    assert [h.type for h in cfg.custom_hooks] == ['TupleMiningHook', 'PCAFitHook']
    cfg.train_cfg.max_epochs = 1
    path = str(tmp_path / name)
    cfg.dump(path)
    train_tool.main([path, '--work-dir', str(tmp_path / 'run')])
    state = safe_torch_load(str(tmp_path / 'run' / 'epoch_1.pth'))['state_dict']
    assert bool(state['neck.1.fitted'])
