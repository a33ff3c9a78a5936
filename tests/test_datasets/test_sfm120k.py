"""SfM120kDataset (plain and tuple mode), tuple_collate and SfMWhitenDataset."""
import os.path as osp
import pickle
import shutil

import numpy as np
import pytest
import torch
from mmengine.registry import FUNCTIONS

from irtbox.datasets import SfM120kDataset, SfMWhitenDataset, tuple_collate
from irtbox.structures import DataSample
from irtbox.apis import register_all_modules

register_all_modules()
PIPELINE = [dict(type='LoadImageFromFile'), dict(type='PackRetrievalInputs')]


@pytest.fixture
def root(data_dir):
    return osp.join(data_dir, 'landmarks', 'sfm120k')


@pytest.fixture
def db(root):
    with open(osp.join(root, 'retrieval-SfM-120k.pkl'), 'rb') as f:
        return pickle.load(f)


def expected_path(root, cid):
    # The released layout: ims/<last 2 chars>/<2 before>/<2 before>/<cid>.
    return '/'.join([root, 'ims', cid[30:32], cid[28:30], cid[26:28], cid])


def rewrite(tmp_path, root, edit, name='retrieval-SfM-120k.pkl'):
    dst = tmp_path / 'sfm'
    shutil.copytree(root, dst)
    with open(osp.join(root, name), 'rb') as f:
        data = pickle.load(f)
    edit(data)
    with open(dst / name, 'wb') as f:
        pickle.dump(data, f)
    return str(dst)


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'val'])
def test_plain_listing(root, db, split):
    ds = SfM120kDataset(data_root=root, split=split)
    part = db[split]
    assert len(ds) == ds.num_images == len(part['cids'])
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert all(len(cid) == 32 for cid in part['cids'])
    assert [d['img_path'] for d in infos] == [expected_path(root, c) for c in part['cids']]
    assert all(osp.isfile(d['img_path']) for d in infos)
    # Labels: the cluster ids in increasing order -> 0..C-1.
    ids = sorted(set(part['cluster']))
    assert ds.metainfo['classes'] == tuple(ids)
    assert ds.clusters.tolist() == [ids.index(c) for c in part['cluster']]
    assert ds.qidxs.tolist() == list(part['qidxs'])
    assert ds.pidxs.tolist() == list(part['pidxs'])
    out = ds.__class__(data_root=root, split=split, pipeline=PIPELINE)[1]
    assert int(out['data_samples'].gt_label) == ids.index(part['cluster'][1])


def test_fixture_pairs_are_same_cluster_and_clusters_are_distinct(db):
    for part in db.values():
        cl = np.asarray(part['cluster'])
        assert (cl[part['qidxs']] == cl[part['pidxs']]).all()
    assert not set(db['train']['cluster']) & set(db['val']['cluster'])


@pytest.mark.parametrize('edit, match', [
    (lambda d: d.pop('val'), r"missing key\(s\) \['val'\]"),
    (lambda d: d['val'].pop('cluster'), r"\['val'\]: missing key\(s\) \['cluster'\]"),
    (lambda d: d['val'].update(cluster=[0, 1]), "one id per image"),
    (lambda d: d['val'].update(pidxs=[1]), "must be aligned"),
    (lambda d: d['val'].update(qidxs=[0, 1, 50]), r"\['qidxs'\]\[2\] = 50 is not an index"),
])
def test_bad_pickle_is_named(tmp_path, root, edit, match):
    data_root = rewrite(tmp_path, root, edit)
    with pytest.raises((KeyError, ValueError), match=match) as info:
        SfM120kDataset(data_root=data_root, split='val')
    assert 'retrieval-SfM-120k.pkl' in str(info.value)


def test_bad_arguments(tmp_path, root):
    with pytest.raises(FileNotFoundError, match='retrieval-SfM-120k.pkl'):
        SfM120kDataset(data_root=str(tmp_path))
    with pytest.raises(ValueError, match='split must be one of'):
        SfM120kDataset(data_root=root, split='test')
    with pytest.raises(ValueError, match='qsize must be a positive int'):
        SfM120kDataset(data_root=root, tuples=True, qsize=0)
    with pytest.raises(ValueError, match='indices is not supported'):
        SfM120kDataset(data_root=root, indices=[0])
    data_root = rewrite(tmp_path, root, lambda d: d['val'].update(qidxs=[], pidxs=[]))
    with pytest.raises(ValueError, match="tuple mode needs query/positive pairs"):
        SfM120kDataset(data_root=data_root, split='val', tuples=True)


def random_tuples(ds, rng):
    """Valid tuples: random pairs, and negatives from other clusters."""
    cl = ds.clusters
    pairs = rng.permutation(len(ds.qidxs))[:len(ds)]
    q, p = ds.qidxs[pairs], ds.pidxs[pairs]
    n = np.stack([rng.choice(np.flatnonzero(cl != cl[i]), ds.nnum, replace=False) for i in q])
    return q, p, n


@pytest.mark.slow
def test_tuple_mode_items(root, db):
    ds = SfM120kDataset(data_root=root, tuples=True, qsize=5, nnum=3, pipeline=PIPELINE)
    assert len(ds) == 5 and ds.num_images == len(db['train']['cids']) and ds.tuple_size == 5
    assert len(SfM120kDataset(data_root=root, tuples=True, qsize=100)) == len(db['train']['qidxs'])
    with pytest.raises(RuntimeError, match='no tuples yet.*TupleMiningHook'):
        ds[0]
    q, p, n = random_tuples(ds, np.random.default_rng(0))
    ds.set_tuples(q, p, n)
    labels = [sorted(set(db['train']['cluster'])).index(c) for c in db['train']['cluster']]
    for t in (0, 4, -1):
        item = ds[t]
        assert isinstance(item, list) and len(item) == 5
        images = [q[t], p[t], *n[t]]
        for k, packed in enumerate(item):
            sample = packed['data_samples']
            assert sample.sample_idx == images[k]
            assert sample.img_path == expected_path(root, db['train']['cids'][images[k]])
            assert sample.tuple_target == [-1, 1, 0, 0, 0][k]
            assert sample.tuple_idx == t % 5
            assert int(sample.gt_label) == labels[images[k]]
            assert packed['inputs'].shape == (3, 48, 64)
    with pytest.raises(IndexError):
        ds[5]


@pytest.mark.slow
def test_set_tuples_checks(root):
    ds = SfM120kDataset(data_root=root, tuples=True, qsize=4, nnum=2)
    q, p, n = random_tuples(ds, np.random.default_rng(1))
    with pytest.raises(ValueError, match=r'expected qidxs \(4,\), pidxs \(4,\) and nidxs \(4, 2\)'):
        ds.set_tuples(q[:3], p[:3], n[:3])
    bad = n.copy()
    bad[2, 1] = q[2]
    with pytest.raises(ValueError, match="negative 1 of tuple 2 .* is in the query's cluster"):
        ds.set_tuples(q, p, bad)
    bad[2, 1] = 10_000
    with pytest.raises(ValueError, match='is not an index in'):
        ds.set_tuples(q, p, bad)
    with pytest.raises(RuntimeError, match='not in tuple mode'):
        SfM120kDataset(data_root=root).set_tuples(q, p, n)


@pytest.mark.slow
def test_tuple_collate_flattens_in_tuple_order(root):
    assert FUNCTIONS.get('tuple_collate') is tuple_collate
    ds = SfM120kDataset(data_root=root, tuples=True, qsize=6, nnum=5, pipeline=PIPELINE)
    q, p, n = random_tuples(ds, np.random.default_rng(2))
    ds.set_tuples(q, p, n)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=False,
                                         collate_fn=tuple_collate)
    batches = list(loader)
    assert [len(b['inputs']) for b in batches] == [28, 14]
    batch = batches[0]
    assert all(isinstance(s, DataSample) for s in batch['data_samples'])
    expected = np.concatenate([q[:4, None], p[:4, None], n[:4]], axis=1).reshape(-1)
    assert [s.sample_idx for s in batch['data_samples']] == expected.tolist()
    assert [s.tuple_target for s in batch['data_samples']] == [-1, 1, 0, 0, 0, 0, 0] * 4
    assert [s.tuple_idx for s in batch['data_samples']] == np.repeat(range(4), 7).tolist()
    assert [int(s.gt_label) for s in batch['data_samples']] == ds.clusters[expected].tolist()
    torch.testing.assert_close(batch['inputs'][7], ds[1][0]['inputs'])
    with pytest.raises(TypeError, match='item 0 of the batch is a dict'):
        tuple_collate([dict(inputs=None)])


@pytest.mark.slow
def test_whiten_dataset(root):
    with open(osp.join(root, 'retrieval-SfM-120k-whiten.pkl'), 'rb') as f:
        raw = pickle.load(f)
    ds = SfMWhitenDataset(data_root=root, pipeline=PIPELINE)
    assert len(ds) == len(raw['cids'])
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == [
        expected_path(root, c) for c in raw['cids']]
    assert ds.metainfo['qidxs'] == list(raw['qidxs'])
    assert ds.metainfo['pidxs'] == list(raw['pidxs'])
    assert ds[0]['inputs'].shape == (3, 48, 64)
    assert 'gt_label' not in ds[0]['data_samples']


@pytest.mark.slow
def test_whiten_dataset_errors(tmp_path, root):
    name = 'retrieval-SfM-120k-whiten.pkl'
    data_root = rewrite(tmp_path, root, lambda d: d.pop('pidxs'), name)
    with pytest.raises(KeyError, match=r"whiten.pkl: missing key\(s\) \['pidxs'\]"):
        SfMWhitenDataset(data_root=data_root)
    shutil.rmtree(data_root)
    # The whitening set: 2 images of each of the 4 val clusters, so indices 0 .. 7.
    data_root = rewrite(tmp_path, root, lambda d: d.update(qidxs=[0, 2, 4, 8]), name)
    with pytest.raises(ValueError, match=r"\['qidxs'\]\[3\] = 8 is not an index in \[0, 8\)"):
        SfMWhitenDataset(data_root=data_root)
    with pytest.raises(FileNotFoundError, match=name):
        SfMWhitenDataset(data_root=str(tmp_path / 'none'))
