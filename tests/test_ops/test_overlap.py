"""irtbox check overlap: on the folder miniature with test images planted in training classes,
the report finds exactly the planted pairs at the default threshold with a random model, and a
training config given its exclude file leaves those classes out."""
import csv
import json
import os.path as osp
import shutil

import pytest
import torch
from mmengine.registry import DefaultScope
from PIL import Image

from irtbox.cli import check, run
from irtbox.registry import DATASETS
from irtbox.utils.config import load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# test image -> the training class folder it is planted in (a PNG and a JPEG: both decoders)
PLANTED = {'test/fox/fox_0.png': 'ant', 'test/gnu/gnu_1.jpg': 'cat'}
# The tiny random ViT with one 32 x 32 patch, averaged: unlike a class token, its random
# features of different images differ (best cross-split cosine 0.76-0.88 over seeds 0-5 on
# this miniature), so only copies pass 0.9.
CONFIG = """
_base_ = [{base!r}]
model = dict(backbone=dict(patch_size=32), neck=[dict(type='AvgPool')])
pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(32, 32), keep_ratio=False),
            dict(type='PackRetrievalInputs')]
train_dataloader = dict(dataset=dict(_delete_=True, type='FolderDataset', data_root={root!r},
                                     split='train', pipeline=pipeline))
test_dataloader = dict(dataset=dict(_delete_=True, type='FolderDataset', data_root={root!r},
                                    split='test', pipeline=pipeline))
"""


@pytest.fixture(scope='module')
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('overlap')
    root = str(tmp / 'folder')
    shutil.copytree(osp.join(ROOT, 'tests', 'data', 'folder'), root)
    pairs = set()
    for test, cls in PLANTED.items():
        train = osp.join(root, 'train', cls, 'planted_' + osp.basename(test))
        shutil.copyfile(osp.join(root, test), train)
        pairs.add((osp.join(root, test), train))
    config = str(tmp / 'overlap_config.py')
    with open(config, 'w') as f:
        f.write(CONFIG.format(base=osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'),
                              root=root))
    out = str(tmp / 'report')
    torch.manual_seed(0)
    summary = check.main(['overlap', config, config, '--checkpoint', 'none', '--out-dir', out,
                          '--num-workers', '0', '--block-size', '5'])  # 14 rows: 3 blocks
    return config, out, pairs, summary


def test_the_report_finds_exactly_the_planted_pairs(planted):
    config, out, pairs, summary = planted
    with open(osp.join(out, 'pairs.csv')) as f:
        rows = list(csv.DictReader(f))
    assert {(r['test_image'], r['train_image']) for r in rows} == pairs
    assert all(float(r['similarity']) > 0.9999 for r in rows)
    assert {r['train_class'] for r in rows} == set(PLANTED.values())
    with open(osp.join(out, 'exclude_classes.json')) as f:
        assert json.load(f) == ['ant', 'cat']
    assert summary['pairs'] == 2 and summary['test_images'] == 12
    assert summary['train_images'] == 14 and summary['pairs_per_test_class'] == dict(fox=1, gnu=1)
    assert summary['pairs_per_train_class'] == dict(ant=1, cat=1)
    assert sum(summary['best_similarity']['histogram_counts']) == 12
    with open(osp.join(out, 'summary.json')) as f:
        assert json.load(f) == json.loads(json.dumps(summary))
    for name in ('histogram.png', 'top_pairs.png'):
        with Image.open(osp.join(out, name)) as image:
            assert image.format == 'PNG' and image.width > 100


def test_a_training_config_given_the_exclude_file_drops_those_classes(planted):
    config, out, _, _ = planted
    cfg = load_config(config, {'train_dataloader.dataset.exclude_classes':
                               osp.join(out, 'exclude_classes.json')})
    with DefaultScope.overwrite_default_scope('irtbox'):
        dataset = DATASETS.build(cfg.train_dataloader.dataset)
    assert dataset.metainfo['classes'] == ('bee', 'dog', 'elk')
    assert sorted(set(dataset.get_gt_labels())) == [0, 1, 2]


@pytest.mark.parametrize('args, message', [
    (['--threshold', '1.5'], '--threshold 1.5: expected a cosine similarity in [-1, 1]'),
    (['--cfg-options', 'train_dataloader=None'], 'no train_dataloader with a dataset'),
])
def test_bad_inputs_end_in_one_line(planted, capsys, args, message):
    config, out, _, _ = planted
    with pytest.raises(SystemExit) as stop:
        run(check.main, ['overlap', config, config, '--checkpoint', 'none', '--out-dir',
                         out + '_bad', *args])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
