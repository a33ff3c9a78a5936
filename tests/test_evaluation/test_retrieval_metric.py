import json

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from mmengine.evaluator import Evaluator

from irtbox.evaluation import RetrievalMetric
from irtbox.evaluation.functional import retrieval_metrics
from irtbox.registry import METRICS
from irtbox.structures import DataSample

KS = (1, 2, 4)


def percent(fractions: dict) -> dict:
    """The functional API's fractions as the metric reports them (percent)."""
    return {k: 100 * v for k, v in fractions.items()}


def make_data(n=25, seed=0):
    rng = np.random.default_rng(seed)
    emb = rng.integers(-1, 2, size=(n, 4)).astype(np.float32)
    emb[:, 0] += 3  # no zero vectors
    labels = rng.integers(0, 5, size=n)
    return emb, labels


def make_sample(i, emb, labels, is_query=None):
    meta = dict(sample_idx=i)
    if is_query is not None:
        meta['is_query'] = bool(is_query[i])
    sample = DataSample(metainfo=meta)
    sample.set_gt_label(int(labels[i]))
    sample.set_embedding(torch.from_numpy(emb[i]))
    return sample


def feed(metric, order, emb, labels, is_query=None, batch=4):
    """process() in batches; every other sample as the dict the Evaluator makes."""
    samples = [make_sample(i, emb, labels, is_query) for i in order]
    samples = [s.to_dict() if j % 2 else s for j, s in enumerate(samples)]
    for start in range(0, len(samples), batch):
        metric.process(None, samples[start:start + batch])


def test_shuffled_and_padded_samples_are_ordered_and_deduplicated():
    emb, labels = make_data()
    n = len(labels)
    rng = np.random.default_rng(1)
    # Shuffled, with repeats as DefaultSampler's padding would add.
    order = np.concatenate([rng.permutation(n), [3, 17, 3, 0]])
    metric = RetrievalMetric(ks=KS)
    feed(metric, order, emb, labels)
    got = metric.evaluate(size=n)
    assert got == percent(retrieval_metrics(emb, labels, ks=KS))
    assert set(got) == {'recall@1', 'recall@2', 'recall@4', 'map@r', 'r_precision',
                        'precision@1'}
    out = metric.last_outputs
    np.testing.assert_array_equal(out['sample_idx'], np.arange(n))
    np.testing.assert_array_equal(out['embeddings'], emb)
    np.testing.assert_array_equal(out['labels'], labels)
    assert not out['is_query'].any()
    assert metric.results == []
    # Kept duplicates would add same-label twins as neighbours and raise recall.
    with_dupes = np.concatenate([emb, emb[[3, 17, 0]]]), np.concatenate([labels,
                                                                         labels[[3, 17, 0]]])
    assert percent(retrieval_metrics(*with_dupes, ks=KS)) != got


def test_query_gallery_mode():
    emb, labels = make_data(30, seed=2)
    is_query = np.zeros(30, dtype=bool)
    is_query[::3] = True
    metric = RetrievalMetric(ks=KS, prefix='inshop')
    feed(metric, np.random.default_rng(0).permutation(30), emb, labels, is_query)
    got = metric.evaluate(size=30)
    expected = retrieval_metrics(emb[is_query], labels[is_query], emb[~is_query],
                                 labels[~is_query], ks=KS)
    assert got == {f'inshop/{k}': 100 * v for k, v in expected.items()}
    np.testing.assert_array_equal(metric.last_outputs['is_query'], is_query)


def test_through_mmengine_evaluator_and_registry():
    emb, labels = make_data()
    evaluator = Evaluator(
        METRICS.build(dict(type='RetrievalMetric', ks=[1, 2], map_at_r=False,
                           search=dict(type='FaissSearcher', chunk_size=8))))
    samples = [make_sample(i, emb, labels) for i in range(len(labels))]
    for start in range(0, len(samples), 10):
        evaluator.process(data_samples=samples[start:start + 10], data_batch=None)
    got = evaluator.evaluate(len(samples))
    assert got == percent(retrieval_metrics(emb, labels, ks=(1, 2), map_at_r=False))


def test_compute_metrics_matches_evaluate():
    emb, labels = make_data()
    metric = RetrievalMetric(ks=KS)
    feed(metric, range(len(labels)), emb, labels)
    assert metric.compute_metrics(metric.results) == percent(
        retrieval_metrics(emb, labels, ks=KS))


def test_bad_configs_and_samples():
    with pytest.raises(ValueError, match='FaissSearcher has no setting metric'):
        RetrievalMetric(search=dict(type='FaissSearcher', metric='l2'))
    with pytest.raises(ValueError, match=r'^RetrievalMetric: ks must hold positive integers, '
                                         r'got 0 in ks=\(1, 0\)$'):
        RetrievalMetric(ks=(1, 0))
    emb, labels = make_data()
    metric = RetrievalMetric()
    sample = make_sample(0, emb, labels).to_dict()
    del sample['embedding']
    with pytest.raises(KeyError, match="no 'embedding'"):
        metric.process(None, [sample])

    # The same sample_idx with two labels is not padding: refuse.
    metric = RetrievalMetric(ks=(1, ))
    feed(metric, range(5), emb, labels)
    clash = make_sample(2, emb, labels)
    clash.set_gt_label(int(labels[2]) + 1)
    metric.process(None, [clash])
    with pytest.raises(ValueError, match='sample_idx 2 arrives with different labels'):
        metric.evaluate(size=5)

    metric = RetrievalMetric(ks=(1, ))
    feed(metric, range(5), emb, labels, is_query=np.ones(25, dtype=bool))
    with pytest.raises(ValueError, match='gallery is empty'):
        metric.evaluate(size=5)


def _gather_worker(rank, tmp):
    """One of two gloo ranks: feeds its DefaultSampler shard to a RetrievalMetric."""
    import irtbox.evaluation.metrics.gather as gather
    from tests.gpu_semantics import nccl_rules
    import torch.distributed as dist
    from mmengine.dataset import DefaultSampler

    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'file://{tmp}/init', rank=rank, world_size=2)
    try:
        data = np.load(f'{tmp}/data.npz')
        emb, labels = data['emb'], data['labels']
        # DefaultSampler shuffles, shards and pads with repeated samples.
        mine = list(DefaultSampler(list(range(len(labels))), shuffle=True, seed=0))
        metric = RetrievalMetric(ks=(1, 2, 4))
        for start in range(0, len(mine), 3):
            samples = []
            for i in mine[start:start + 3]:
                s = DataSample(metainfo=dict(sample_idx=i)).set_gt_label(int(labels[i]))
                samples.append(s.set_embedding(torch.from_numpy(emb[i])).to_dict())
            metric.process(None, samples)
        # Blocks of 2 embeddings (16 floats): the gather takes several gathers per key,
        # under NCCL's rules, with nothing written to a shared folder.
        gather._BLOCK_BYTES = 2 * emb.shape[1] * 4
        with nccl_rules() as called:
            metrics = metric.evaluate(len(labels))
        assert called.count('gather') >= 6 and 'all_gather' not in called, called
        out = metric.last_outputs
        with open(f'{tmp}/rank{rank}.json', 'w') as f:
            json.dump(dict(metrics=metrics, num_seen=len(mine),
                           sample_idx=None if out is None else out['sample_idx'].tolist()), f)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_process_gather_by_sample_index(tmp_path):
    emb, labels = make_data(n=23, seed=4)  # odd: the sampler pads one rank
    np.savez(tmp_path / 'data.npz', emb=emb, labels=labels)
    # Forked ranks: spawned ones would import torch and irtbox again (seconds each).
    mp.start_processes(_gather_worker, args=(str(tmp_path),), nprocs=2, start_method='fork')
    ranks = [json.loads((tmp_path / f'rank{r}.json').read_text()) for r in range(2)]
    assert [r['num_seen'] for r in ranks] == [12, 12]  # 24 = 23 + one padding repeat
    expected = percent(retrieval_metrics(emb, labels, ks=(1, 2, 4)))
    for r in ranks:  # rank 1 gets rank 0's result by broadcast
        assert r['metrics'] == pytest.approx(expected, abs=0)
    assert ranks[0]['sample_idx'] == list(range(23))
    assert ranks[1]['sample_idx'] is None


def test_non_finite_embeddings_name_the_samples(monkeypatch):
    """A model that outputs NaN is an error naming how many test images and which, not a
    table of meaningless numbers (the check runs in blocks of rows: a small block here)."""
    import irtbox.evaluation.metrics.gather as gather
    monkeypatch.setattr(gather, '_FINITE_ROWS', 4)
    emb, labels = make_data()
    emb = emb.copy()
    emb[[5, 9], 1] = np.nan
    emb[12, 0] = np.inf
    metric = RetrievalMetric(ks=KS)
    feed(metric, np.arange(len(labels)), emb, labels)
    with pytest.raises(ValueError, match=r'^RetrievalMetric: the model gave non-finite \(NaN or '
                       r'inf\) embeddings for 3 of \d+ test images \(sample_idx 5, 9, 12\)'):
        metric.evaluate(size=len(labels))


def test_tied_embeddings_are_said_in_the_log(warnings_logged):
    # Before: all-identical embeddings (a collapsed model) ranked by file order, no word.
    from irtbox.evaluation.metrics.retrieval_metric import warn_tied_embeddings
    emb, labels = make_data()
    same = np.ones_like(emb)
    metric = RetrievalMetric(ks=KS)
    feed(metric, np.arange(len(labels)), same, labels)
    metric.evaluate(size=len(labels))
    assert [m for m in warnings_logged if m.startswith(
        f'RetrievalMetric: {len(labels)} of {len(labels)} embeddings (100%) are identical to '
        'another (1 distinct): their scores tie')]
    distinct = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    assert warn_tied_embeddings(distinct) is None
    distinct[:4] = distinct[4]  # 5 of 50 tie: 10%, not more
    assert warn_tied_embeddings(distinct) is None
    distinct[5] = distinct[4]
    assert warn_tied_embeddings(distinct).startswith('RetrievalMetric: 6 of 50 embeddings (12%)')
