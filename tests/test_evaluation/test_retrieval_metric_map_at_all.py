import os.path as osp

import numpy as np
import pytest
import torch

from irtbox.datasets import CSVDataset
from irtbox.evaluation import RetrievalMetric
from irtbox.structures import DataSample

DATA_DIR = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'data')


def slow_map_at_all(emb, labels, is_query, junk):
    """Brute force: the whole similarity matrix, a stable sort, and AP
    summed one ranked item at a time. junk: {query sample_idx: [sample_idx]}."""
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    leave_one_out = not is_query.any()
    queries = np.arange(len(emb)) if leave_one_out else np.flatnonzero(is_query)
    gallery = np.arange(len(emb)) if leave_one_out else np.flatnonzero(~is_query)
    aps = []
    for q in queries:
        ignore = set(junk.get(int(q), [])) | ({int(q)} if leave_one_out else set())
        sims = emb[gallery] @ emb[q]
        order = gallery[np.argsort(-sims, kind='stable')]
        ranked = [g for g in order if g not in ignore]
        n_pos = sum(labels[g] == labels[q] for g in ranked)
        if n_pos == 0:
            aps.append(np.nan)
            continue
        hits, total = 0, 0.0
        for rank, g in enumerate(ranked, start=1):
            if labels[g] == labels[q]:
                hits += 1
                total += hits / rank
        aps.append(total / n_pos)
    return np.array(aps)


def feed(metric, emb, labels, is_query=None, batch=3):
    samples = []
    for i in np.random.default_rng(0).permutation(len(emb)):
        meta = dict(sample_idx=int(i))
        if is_query is not None:
            meta['is_query'] = bool(is_query[i])
        sample = DataSample(metainfo=meta)
        sample.set_gt_label(int(labels[i]))
        sample.set_embedding(torch.from_numpy(emb[i]))
        samples.append(sample)
    for start in range(0, len(samples), batch):
        metric.process(None, samples[start:start + batch])


def test_hand_computed_with_junk():
    # Embeddings on a circle: similarity to the query falls with the angle.
    angles = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    emb = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    labels = np.array([0, 1, 0, 1, 0, 1])
    is_query = np.array([True, False, False, False, False, False])
    # Gallery ranking of query 0: 1 (neg), 2 (pos), 3 (neg), 4 (pos), 5 (neg).
    metric = RetrievalMetric(ks=(1, ), map_at_r=False, map_at_all=True)
    feed(metric, emb, labels, is_query)
    got = metric.evaluate(size=6)
    assert got['map@all'] == pytest.approx(100 * (1 / 2 + 2 / 4) / 2)
    assert got['recall@1'] == 0
    # Junk 1 (ranked first): the positives move to 0 and 2.
    metric.dataset_meta = dict(junk={0: [1]})
    feed(metric, emb, labels, is_query)
    got = metric.evaluate(size=6)
    assert got['map@all'] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert got['recall@1'] == 0  # the junk affects map@all only
    np.testing.assert_allclose(metric.last_outputs['ap_all'], [100 * (1 + 2 / 3) / 2])
    # A positive as junk: only 4 is left, at position 1 after removing 1.
    metric.dataset_meta = dict(junk={0: [1, 2]})
    feed(metric, emb, labels, is_query)
    assert metric.evaluate(size=6)['map@all'] == pytest.approx(100 / 2)


@pytest.mark.parametrize('chunk_size', [1, 4, 1024])
def test_query_gallery_against_brute_force(chunk_size):
    rng = np.random.default_rng(1)
    n = 40
    emb = rng.normal(size=(n, 8)).astype(np.float32)
    labels = rng.integers(0, 6, n)
    is_query = rng.random(n) < 0.3
    queries, gallery = np.flatnonzero(is_query), np.flatnonzero(~is_query)
    junk = {int(q): rng.choice(gallery, size=3, replace=False).tolist() for q in queries[::2]}
    labels[queries[-1]] = 99  # a query with no positive: left out
    metric = RetrievalMetric(ks=(1, 5), map_at_all=True, prefix='mine',
                             search=dict(type='ExactSearcher', chunk_size=chunk_size))
    metric.dataset_meta = dict(junk=junk)
    feed(metric, emb, labels, is_query)
    got = metric.evaluate(size=n)
    expected = slow_map_at_all(emb, labels, is_query, junk)
    assert np.isnan(expected[-1])
    np.testing.assert_allclose(metric.last_outputs['ap_all'], 100 * expected, rtol=1e-6,
                               equal_nan=True)
    assert got['mine/map@all'] == pytest.approx(100 * np.nanmean(expected), rel=1e-6)
    assert set(got) == {'mine/recall@1', 'mine/recall@5', 'mine/map@r', 'mine/r_precision',
                        'mine/precision@1', 'mine/map@all'}
    # Without the junk the number differs (the test can fail).
    assert 100 * np.nanmean(slow_map_at_all(emb, labels, is_query, {})) != pytest.approx(
        got['mine/map@all'])


def test_leave_one_out_excludes_the_query_itself():
    rng = np.random.default_rng(2)
    emb = rng.normal(size=(20, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 20)
    metric = RetrievalMetric(ks=(), map_at_r=False, map_at_all=True)
    metric.dataset_meta = dict(junk={3: [5, 7]})
    feed(metric, emb, labels)
    got = metric.evaluate(size=20)
    assert set(got) == {'map@all'}
    expected = slow_map_at_all(emb, labels, np.zeros(20, dtype=bool), {3: [5, 7]})
    assert got['map@all'] == pytest.approx(100 * np.nanmean(expected), rel=1e-6)


def test_off_by_default():
    rng = np.random.default_rng(3)
    emb, labels = rng.normal(size=(10, 4)).astype(np.float32), rng.integers(0, 3, 10)
    metric = RetrievalMetric(ks=(1, ))
    feed(metric, emb, labels)
    assert 'map@all' not in metric.evaluate(size=10)
    assert 'ap_all' not in metric.last_outputs


@pytest.mark.slow
def test_csv_junk_file_end_to_end():
    ds = CSVDataset(data_root=osp.join(DATA_DIR, 'csv'), ann_file='annotations.csv',
                    split='test', junk_file='junk.csv')
    labels, is_query = ds.get_gt_labels(), ds.get_query_mask()
    emb = np.random.default_rng(4).normal(size=(len(ds), 6)).astype(np.float32)
    metric = RetrievalMetric(ks=(1, ), map_at_all=True)
    metric.dataset_meta = ds.metainfo
    feed(metric, emb, labels, is_query)
    got = metric.evaluate(size=len(ds))
    junk = ds.metainfo['junk']
    assert junk  # the fixture's junk lines of the test split
    expected = slow_map_at_all(emb, labels, is_query, junk)
    assert got['map@all'] == pytest.approx(100 * np.nanmean(expected), rel=1e-6)


@pytest.mark.parametrize('junk, error, message', [
    ([1, 2], TypeError, r"dataset_meta\['junk'\] must be a dict"),
    ({1: [2]}, ValueError, r"names sample_idx 1 as a query, but it is not a query"),
    ({0: [0]}, ValueError, r"names sample_idx 0 as a gallery item"),
    ({0: [17]}, ValueError, r"names sample_idx 17 as a gallery item"),
    ({'0': [1]}, TypeError, r"expected integer sample indices, got '0'"),
    ({0: 1}, TypeError, r"\[0\] must be a list of gallery sample indices"),
])
def test_bad_junk(junk, error, message):
    emb = np.eye(4, dtype=np.float32)
    metric = RetrievalMetric(ks=(1, ), map_at_all=True)
    metric.dataset_meta = dict(junk=junk)
    feed(metric, emb, np.array([0, 0, 1, 1]), np.array([True, False, False, False]))
    with pytest.raises(error, match=message):
        metric.evaluate(size=4)


def test_nothing_to_compute():
    with pytest.raises(ValueError, match='nothing to compute'):
        RetrievalMetric(ks=(), map_at_r=False, map_at_all=False)
