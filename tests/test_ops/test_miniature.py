"""Miniatures (irtbox.ops.miniature, the writers beside each dataset class): every kind, written to a temporary folder,
loads with its dataset class built through the registry from a config like the
shipped ones, with the promised numbers of images, classes, queries and pairs."""
import filecmp
import glob
import os
import os.path as osp

import cv2
import numpy as np
import pytest
from mmengine.config import Config

from irtbox.apis import register_all_modules
from irtbox.ops.miniature import (MINIATURE_KINDS, miniature_kind, miniature_kinds,
                                  point_at_miniature, write_miniature)
from irtbox.datasets.samplers import GroupSizeSampler, MPerClassSampler
from irtbox.registry import DATASETS

register_all_modules()
ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
C, M = 8, 4  # the default classes per split and images per class


@pytest.fixture(scope='module')
def roots(tmp_path_factory):
    """Every kind written once with the defaults: {kind: root}."""
    base = tmp_path_factory.mktemp('miniatures')
    return {kind: write_miniature(kind, str(base / kind)) for kind in MINIATURE_KINDS}


def build(cfg, roots):
    """The dataset of ``cfg`` (its paths as a shipped config has them) pointed at the
    miniatures, built through the registry."""
    for kind in miniature_kinds(cfg):
        cfg = point_at_miniature(cfg, roots[kind], kind)
    # Serialising a sample list runs a full gc.collect(), a quarter second per dataset.
    cfg = dict(cfg, serialize_data=False)
    if 'dataset' in cfg:
        cfg['dataset'] = dict(cfg['dataset'], serialize_data=False)
    return DATASETS.build(cfg)


def paths(ds):
    return [ds.get_data_info(i)['img_path'] for i in range(len(ds))]


def assert_query_and_gallery_per_class(ds):
    labels, is_query = ds.get_gt_labels(), ds.get_query_mask()
    assert set(labels[is_query]) == set(labels[~is_query]) == set(range(ds.num_classes))


@pytest.mark.slow
@pytest.mark.parametrize('dataset_type', ['SOPDataset', 'CUBDataset', 'Cars196Dataset',
                                          'INaturalist2018Dataset', 'FolderDataset'])
def test_leave_one_out_splits(roots, dataset_type):
    splits = [build(dict(type=dataset_type, data_root='data/x', split=split), roots)
              for split in ('train', 'test')]
    for ds in splits:
        assert len(ds) == C * M and ds.num_classes == C and ds.get_query_mask() is None
        assert all(osp.isfile(p) for p in paths(ds))
        assert len(MPerClassSampler(ds, batch_size=8, m=4, seed=0)) >= 8
    assert not set(paths(splits[0])) & set(paths(splits[1]))
    assert not set(splits[0].metainfo['classes']) & set(splits[1].metainfo['classes'])


def test_cars196_formats_agree_and_boxes_fit(roots):
    mat, csv = (build(dict(type='Cars196Dataset', data_root='data/cars196', split='test',
                           ann_format=fmt), roots) for fmt in ('mat', 'csv'))
    assert sorted(mat.get_gt_labels()) == sorted(csv.get_gt_labels())
    for i in range(len(mat)):
        info = mat.get_data_info(i)
        x1, y1, x2, y2 = info['bbox']
        height, width = cv2.imread(info['img_path']).shape[:2]
        assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height


@pytest.mark.parametrize('cfg', [
    dict(type='InShopDataset', data_root='data/inshop'),
    dict(type='CSVDataset', data_root='data/digits', ann_file='benchmark_split.csv',
         junk_file='junk.csv'),
])
def test_query_gallery_splits(roots, cfg):
    train = build(dict(cfg, split='train'), roots)
    assert len(train) == C * M and train.num_classes == C and train.get_query_mask() is None
    test = build(dict(cfg, split='test'), roots)
    assert len(test) == C * M and test.num_classes == C
    assert test.get_query_mask().sum() == C * M // 2
    assert_query_and_gallery_per_class(test)


@pytest.mark.parametrize('dataset_type, extra', [
    ('GLDv2CleanDataset', {}), ('GLDv1NoisyDataset', dict(skip_missing=True)),
    ('NCCleanDataset', dict(skip_missing=True))])
def test_landmark_training_sets(roots, dataset_type, extra):
    ds = build(dict(type=dataset_type, data_root='data/x', split='train', **extra), roots)
    assert len(ds) == C * M and ds.num_classes == C
    assert all(osp.isfile(p) for p in paths(ds))
    assert len(GroupSizeSampler(ds, batch_size=8, seed=0)) == C * M


def test_sfm120k_plain_tuples_and_whitening(roots):
    cfg = dict(type='SfM120kDataset', data_root='data/sfm120k', split='train')
    plain = build(cfg, roots)
    assert len(plain) == C * M and plain.num_classes == C
    clusters = plain.clusters
    assert len(plain.qidxs) == C * (M - 1)
    assert (clusters[plain.qidxs] == clusters[plain.pidxs]).all()
    assert len(GroupSizeSampler(plain, batch_size=8, seed=0)) == C * M

    tuples = build(dict(cfg, tuples=True, qsize=1000, nnum=5), roots)
    assert len(tuples) == C * (M - 1) and tuples.num_images == C * M
    # nnum = 5 negatives, each from another cluster than the query's
    q, p = tuples.qidxs, tuples.pidxs
    negatives = [[np.flatnonzero(clusters == c)[0] for c in range(C) if c != clusters[i]][:5]
                 for i in q]
    tuples.set_tuples(q, p, negatives)

    val = build(dict(cfg, split='val'), roots)
    assert not set(val.metainfo['classes']) & set(plain.metainfo['classes'])
    whiten = build(dict(type='SfMWhitenDataset', data_root='data/sfm120k'), roots)
    qidxs, pidxs = whiten.metainfo['qidxs'], whiten.metainfo['pidxs']
    assert len(whiten) == 2 * len(qidxs) == 2 * val.num_classes
    assert sorted(qidxs + pidxs) == list(range(len(whiten)))
    assert all(osp.isfile(whiten.get_data_info(i)['img_path']) for i in range(len(whiten)))


@pytest.mark.parametrize('name', ['roxford5k', 'rparis6k'])
def test_revisited_with_distractors(roots, name):
    cfg = dict(type='RevisitedDataset', data_root=f'data/{name}', dataset_name=name,
               distractors_list='revisitop1m.txt', distractors_root='data/revisitop1m/jpg')
    assert miniature_kinds(cfg) == (name, 'revisitop1m')
    ds = build(cfg, roots)
    meta = ds.metainfo
    assert (meta['num_queries'], meta['num_database'], meta['num_distractors']) == (
        C, C * M + 4, 8)
    assert all(osp.isfile(p) for p in paths(ds))
    for q, g in enumerate(meta['gnd']):
        assert g['easy'] and g['hard'] and g['junk']
        height, width = cv2.imread(ds.get_data_info(q)['img_path']).shape[:2]
        x1, y1, x2, y2 = g['bbx']
        assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height
    labelled = [i for g in meta['gnd'] for key in ('easy', 'hard', 'junk') for i in g[key]]
    assert sorted(labelled) == sorted(set(labelled)) and len(labelled) == C * M


def shipped_dataset_cfgs():
    """(config file, dataset config) of every dataset the shipped dataset configs
    and the DToP configs on the GLD / NC-clean sets build."""
    files = sorted(glob.glob(osp.join(ROOT, 'configs', '_base_', 'datasets', '*.py')))
    for name in ('gldv1noisy', 'gldv2clean', 'ncclean'):
        files += glob.glob(osp.join(ROOT, 'configs', 'dtop', f'dtop_*_{name}.py'))

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == 'dataset' and isinstance(value, dict):
                    yield value  # not inside: a wrapper's inner dataset is part of it
                else:
                    yield from walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                yield from walk(value)

    for path in files:
        for cfg in walk(Config.fromfile(path).to_dict()):
            yield osp.relpath(path, ROOT), cfg


@pytest.mark.slow
def test_every_shipped_dataset_config_runs_on_a_miniature(roots):
    types = set()
    for path, cfg in shipped_dataset_cfgs():
        inner = cfg
        while isinstance(inner.get('dataset'), dict):
            inner = inner['dataset']
        if 'type' not in inner:
            continue  # a base file's partial config, completed by the files using it
        assert miniature_kind(cfg), f'{path}: no miniature for {inner["type"]}'
        assert len(build(cfg, roots)) > 0, path
        types.add(inner['type'])
    assert types == {'SOPDataset', 'CUBDataset', 'Cars196Dataset', 'InShopDataset',
                     'INaturalist2018Dataset', 'CSVDataset', 'SfM120kDataset', 'SfMWhitenDataset',
                     'RevisitedDataset', 'GLDv2CleanDataset', 'GLDv1NoisyDataset',
                     'NCCleanDataset'}


def _keys(kind, root):
    """The keys pointing an empty dataset config at the miniature ``kind`` under ``root``."""
    return point_at_miniature({}, root, kind)


def test_miniature_kind_and_config_keys():
    assert miniature_kind(dict(type='BenchmarkSplitDataset',
                               dataset=dict(type='irtbox.CUBDataset'))) == 'cub'
    assert miniature_kind(dict(type='RevisitedDataset', dataset_name='rparis6k')) == 'rparis6k'
    assert miniature_kind(dict(type='RevisitedDataset')) == 'roxford5k'
    assert miniature_kind(dict(type='SfMWhitenDataset')) == 'sfm120k'
    assert miniature_kind(dict(type='MyDataset')) is None
    assert _keys('sop', '/m') == dict(data_root='/m', ann_file='', data_prefix=None)
    assert _keys('csv', '/m')['ann_file'] == 'annotations.csv'
    assert _keys('revisitop1m', '/m') == dict(
        distractors_root=osp.join('/m', 'jpg'), distractors_list=osp.join('/m', 'revisitop1m.txt'))
    cfg = dict(type='BenchmarkSplitDataset', dataset=dict(type='SOPDataset', data_root='d'))
    pointed = point_at_miniature(cfg, '/m')
    assert pointed['dataset']['data_root'] == '/m' and cfg['dataset']['data_root'] == 'd'
    with pytest.raises(ValueError, match='no miniature stands for'):
        point_at_miniature(dict(type='MyDataset'), '/m')


def test_image_fn_counts_and_plan(tmp_path):
    calls = []

    def image_fn(class_index, image_index):
        calls.append((class_index, image_index))
        return np.full((20, 24, 3), 10 * class_index, np.uint8)

    root = write_miniature('sop', str(tmp_path / 'sop'), image_fn, classes=2, per_class=3)
    assert sorted(calls) == [(c, k) for c in (1, 2, 3, 4) for k in range(3)]
    ds = DATASETS.build(dict(type='SOPDataset', data_root=root, split='test', serialize_data=False))
    assert len(ds) == 6 and cv2.imread(paths(ds)[0]).shape == (20, 24, 3)
    root = write_miniature('folder', str(tmp_path / 'folder'), size=12,
                           plan={'train': [('a', 2), ('b', 3)]})
    ds = DATASETS.build(dict(type='FolderDataset', data_root=root, split='train',
                             serialize_data=False))
    assert ds.metainfo['classes'] == ('a', 'b') and len(ds) == 5
    assert {osp.splitext(p)[1] for p in paths(ds)} == {'.png', '.jpg'}
    assert cv2.imread(paths(ds)[0]).shape == (12, 12, 3)


@pytest.mark.slow
def test_same_arguments_same_files(tmp_path):
    first = write_miniature('inshop', str(tmp_path / 'a'))
    second = write_miniature('inshop', str(tmp_path / 'b'))
    files = sorted(osp.relpath(osp.join(d, f), first)
                   for d, _, names in os.walk(first) for f in names)
    assert filecmp.cmpfiles(first, second, files, shallow=False)[0] == files


def test_default_images_tell_classes_apart():
    from irtbox.datasets.miniature import class_image
    images = np.stack([class_image(c, k).astype(np.float64).ravel()
                       for c in range(C) for k in range(M)])
    labels = np.repeat(np.arange(C), M)
    dist = ((images[:, None] - images[None]) ** 2).sum(-1)
    np.fill_diagonal(dist, np.inf)
    assert (labels[dist.argmin(1)] == labels).mean() >= 0.75


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(kind='imagenet'), ValueError, 'unknown kind'),
    (dict(kind='sop', queries=3), TypeError, r"unknown options \['queries'\]"),
    (dict(kind='sop', image_fn=lambda c, k: None, size=16), ValueError, 'size sets the default'),
    (dict(kind='sop', size=4), ValueError, 'size must be an integer >= 8, got 4'),
    (dict(kind='inshop', per_class=1), ValueError, 'per_class must be an integer >= 2, got 1'),
    (dict(kind='cub', classes=101), ValueError,
     r'classes must be an integer in 1 \.\. 100, got 101'),
    (dict(kind='roxford5k', relevance=('easy', 'medium')), ValueError, 'relevance'),
])
def test_bad_arguments(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        write_miniature(root=str(tmp_path / 'x'), **kwargs)


def test_refuses_a_folder_with_files(tmp_path):
    (tmp_path / 'old.txt').write_text('x')
    with pytest.raises(FileExistsError, match='not empty'):
        write_miniature('sop', str(tmp_path))
