"""tools/train.py + tools/test.py on the tiny fixtures of every official format."""
import json
import os.path as osp

import numpy as np
import pytest
import torch

from irtbox.utils.checkpoint import safe_torch_load
from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')

FORMATS = {
    'sop': dict(type='SOPDataset', data_root='tests/data/sop', train='train', test='test'),
    'cub': dict(type='CUBDataset', data_root='tests/data/cub', train='train', test='test'),
    'inshop': dict(type='InShopDataset', data_root='tests/data/inshop', train='train', test='test'),
    'folder': dict(type='FolderDataset', data_root='tests/data/folder', train='train', test='test'),
    'csv': dict(type='CSVDataset', data_root='tests/data/csv', train='train', test='test',
                ann_file='annotations.csv'),
}


def dataset_options(fmt):
    spec = FORMATS[fmt]
    opts = []
    for loader, split in (('train_dataloader', spec['train']), ('val_dataloader', spec['test']),
                          ('test_dataloader', spec['test'])):
        opts += [f'{loader}.dataset.type={spec["type"]}', f'{loader}.dataset.data_root={spec["data_root"]}',
                 f'{loader}.dataset.split={split}']
        if 'ann_file' in spec:
            opts.append(f'{loader}.dataset.ann_file={spec["ann_file"]}')
    return opts


@pytest.mark.slow
@pytest.mark.parametrize('fmt', sorted(FORMATS))
def test_train_then_test(fmt, tmp_path, in_root):
    work_dir = str(tmp_path / 'work')
    train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--cfg-options', *dataset_options(fmt)])
    ckpt = osp.join(work_dir, 'iter_4.pth')
    assert osp.isfile(ckpt)
    out = str(tmp_path / 'results.npz')
    metrics = test_tool.main([TINY_CONFIG, ckpt, '--work-dir', work_dir, '--out', out,
                              '--cfg-options', *dataset_options(fmt)])
    results = np.load(out)
    n = len(results['sample_idx'])
    assert results['embeddings'].shape == (n, 32)
    np.testing.assert_allclose(np.linalg.norm(results['embeddings'], axis=1), 1.0, rtol=1e-5)
    assert sorted(results['sample_idx'].tolist()) == list(range(n))
    assert float(results['metrics/recall@1']) == pytest.approx(metrics['recall@1'])
    with open(str(tmp_path / 'results.json')) as f:
        assert json.load(f)['recall@2'] == pytest.approx(metrics['recall@2'])
    if fmt == 'inshop':
        assert results['is_query'].any() and not results['is_query'].all()


@pytest.mark.slow
def test_resume_continues_where_it_stopped(tmp_path, in_root):
    """4 iterations straight == 2 iterations, then resume from iter_2 for 2 more."""
    straight, resumed = str(tmp_path / 'straight'), str(tmp_path / 'resumed')
    train_tool.main([TINY_CONFIG, '--work-dir', straight])
    train_tool.main([TINY_CONFIG, '--work-dir', resumed, '--cfg-options', 'train_cfg.max_iters=2'])
    train_tool.main([TINY_CONFIG, '--work-dir', resumed, '--resume', osp.join(resumed, 'iter_2.pth')])
    a = safe_torch_load(osp.join(straight, 'iter_4.pth'))
    b = safe_torch_load(osp.join(resumed, 'iter_4.pth'))
    assert b['meta']['iter'] == 4
    for key, value in a['state_dict'].items():
        torch.testing.assert_close(b['state_dict'][key], value, msg=key)
    memory = [k for k in a['state_dict'] if 'memory' in k]
    assert memory, 'the cross-batch memory should be in the checkpoint'


@pytest.mark.slow
def test_resume_latest_in_work_dir(tmp_path, in_root):
    work_dir = str(tmp_path / 'w')
    train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--cfg-options', 'train_cfg.max_iters=2'])
    train_tool.main([TINY_CONFIG, '--work-dir', work_dir, '--resume'])
    assert osp.isfile(osp.join(work_dir, 'iter_4.pth'))


@pytest.mark.slow
def test_test_without_checkpoint(tmp_path, in_root):
    metrics = test_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path)])
    assert 0.0 <= metrics['recall@1'] <= 100.0  # percent


@pytest.mark.slow
def test_approximate_evaluation_from_the_command_line(tmp_path, in_root):
    """--cfg-options test_evaluator.search.* switches test.py to a faiss inverted file; with
    every list probed it reports the exact numbers plus search_recall@10."""
    exact = test_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path / 'exact')])
    approx = test_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path / 'ivf'), '--cfg-options',
                             'test_evaluator.search.type=FaissSearcher',
                             'test_evaluator.search.factory=IVF2,Flat',
                             'test_evaluator.search.nprobe=2'])
    assert approx.pop('search_recall@10') == pytest.approx(100.0)
    assert approx == pytest.approx(exact)


def test_clear_errors(tmp_path, in_root):
    with pytest.raises(FileNotFoundError, match='no_such_config.py'):
        train_tool.main(['no_such_config.py'])
    with pytest.raises(SystemExit, match='checkpoint not found'):
        test_tool.main([TINY_CONFIG, 'missing.pth'])
    with pytest.raises(SystemExit, match='--resume: checkpoint not found'):
        train_tool.main([TINY_CONFIG, '--resume', 'missing.pth'])
    with pytest.raises(SystemExit, match='train_dataloader.sampler.batch_size=4 differs'):
        train_tool.main([TINY_CONFIG, '--cfg-options', 'train_dataloader.batch_size=8'])


@pytest.mark.slow
def test_unavailable_pretrained_weights_are_one_line_and_a_checkpoint_needs_none(
        tmp_path, in_root, monkeypatch):
    """Offline with an empty cache: training a pretrained=True config stops with one line
    naming the ways out; testing a checkpoint of it works (the checkpoint holds the weights)."""
    from huggingface_hub import constants
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(tmp_path / 'empty_cache'))
    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', True)
    pretrained = ['--cfg-options', 'model.backbone.pretrained=True']
    with pytest.raises(SystemExit) as info:
        train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path / 'a'), *pretrained])
    message = str(info.value.code)
    assert '\n' not in message and 'model.backbone.pretrained=False' in message
    train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path / 'b'),
                     '--cfg-options', 'train_cfg.max_iters=2'])
    metrics = test_tool.main([TINY_CONFIG, str(tmp_path / 'b' / 'iter_2.pth'),
                              '--work-dir', str(tmp_path / 'c'), *pretrained])
    assert metrics['recall@1'] >= 0
