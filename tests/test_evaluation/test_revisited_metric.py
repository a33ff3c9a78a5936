import math

import numpy as np
import pytest
import torch
from mmengine.evaluator import Evaluator

from irtbox.evaluation import metrics as metrics_module
from irtbox.evaluation.functional import build_revisited_gnd
from irtbox.registry import METRICS
from irtbox.structures import DataSample

RevisitedMetric = metrics_module.RevisitedMetric

# 14 samples: 3 queries at sample_idx 2, 6, 11 (qimlist order), 10 database
# images, then one R1M distractor (sample_idx 13, database index 10).
N = 14
QUERY_IDX = [2, 6, 11]
GND = [
    dict(easy=[1, 4], hard=[7], junk=[2], bbx=[0, 0, 5, 5]),
    dict(easy=[], hard=[3, 9], junk=[]),
    dict(easy=[0], hard=[], junk=[5, 6]),  # no hard positive: left out of mAP_H
]
META = dict(dataset_name='roxford5k', gnd=GND)


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(N, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb[13] = emb[QUERY_IDX[0]]  # the distractor is query 0's best match
    is_query = np.zeros(N, dtype=bool)
    is_query[QUERY_IDX] = True
    return emb, is_query


def feed(metric, order, emb, is_query, batch=4):
    """process() in batches; every other sample as the dict the Evaluator makes."""
    samples = []
    for j, i in enumerate(order):
        s = DataSample(metainfo=dict(sample_idx=int(i), is_query=bool(is_query[i])))
        s.set_embedding(torch.from_numpy(emb[i]))
        samples.append(s.to_dict() if j % 2 else s)
    for start in range(0, len(samples), batch):
        metric.process(None, samples[start:start + batch])


def expected_metrics(query, db, official_map, name='roxford5k', kappas=(1, 5, 10)):
    ranks = np.argsort(-(db.astype(np.float64) @ query.astype(np.float64).T), axis=0,
                       kind='stable')
    out = {}
    for protocol, s in (('easy', 'E'), ('medium', 'M'), ('hard', 'H')):
        mean_ap, aps, mpr, _ = official_map(ranks, build_revisited_gnd(GND, protocol), kappas)
        out[f'{name}/mAP_{s}'] = 100 * mean_ap
        for k, v in zip(kappas, mpr):
            out[f'{name}/mP@{k}_{s}'] = 100 * v
    return out, aps


def test_shuffled_padded_samples_with_a_distractor(official_map):
    emb, is_query = make_data()
    rng = np.random.default_rng(1)
    order = np.concatenate([rng.permutation(N), [2, 13, 5]])  # padding repeats
    metric = RevisitedMetric(chunk_size=2)
    metric.dataset_meta = META
    feed(metric, order, emb, is_query)
    got = metric.evaluate(size=N)
    expected, aps_h = expected_metrics(emb[is_query], emb[~is_query], official_map)
    assert set(got) == set(expected) and len(got) == 12
    assert got == pytest.approx(expected, rel=1e-9)
    assert math.isnan(aps_h[2]) and not math.isnan(got['roxford5k/mAP_H'])
    out = metric.last_outputs
    np.testing.assert_array_equal(out['sample_idx'], np.arange(N))
    np.testing.assert_array_equal(out['embeddings'], emb)
    np.testing.assert_array_equal(out['is_query'], is_query)
    assert out['ap_H'].shape == (3, ) and math.isnan(out['ap_H'][2])
    assert metric.results == []
    # The distractor is a negative ranked first for query 0: without it AP is higher.
    keep = np.arange(N) != 13
    without, _ = expected_metrics(emb[keep & is_query], emb[keep & ~is_query], official_map)
    assert without['roxford5k/mAP_E'] > got['roxford5k/mAP_E']


def test_query_expansion_and_database_augmentation(official_map):
    emb, is_query = make_data(seed=2)
    metric = RevisitedMetric(query_expansion=dict(k=2, alpha=3),
                             database_augmentation=dict(k=3, alpha=3), kappas=(1, 5),
                             prefix='rox')
    metric.dataset_meta = META
    feed(metric, range(N), emb, is_query)
    got = metric.evaluate(size=N)
    # Written out with full similarity matrices: DBA first, then QE on the new database.
    db = emb[~is_query].astype(np.float64)
    sims = db @ db.T
    np.fill_diagonal(sims, -np.inf)
    new_db = db.copy()
    for i in range(len(db)):
        for j in np.argsort(-sims[i], kind='stable')[:3]:
            new_db[i] += max(sims[i, j], 0)**3 * db[j]
    new_db /= np.linalg.norm(new_db, axis=1, keepdims=True)
    query = emb[is_query].astype(np.float64)
    new_q = query.copy()
    qsims = query @ new_db.T
    for i in range(len(query)):
        for j in np.argsort(-qsims[i], kind='stable')[:2]:
            new_q[i] += max(qsims[i, j], 0)**3 * new_db[j]
    new_q /= np.linalg.norm(new_q, axis=1, keepdims=True)
    expected, _ = expected_metrics(new_q, new_db, official_map, name='rox', kappas=(1, 5))
    assert got == pytest.approx(expected, rel=1e-9)
    plain, _ = expected_metrics(emb[is_query], emb[~is_query], official_map, name='rox',
                                kappas=(1, 5))
    assert plain != pytest.approx(expected)  # the re-ranking made a difference


def test_through_evaluator_registry_and_one_protocol(official_map):
    emb, is_query = make_data(seed=3)
    evaluator = Evaluator(METRICS.build(dict(type='RevisitedMetric', protocols=['hard'],
                                             kappas=[1])))
    evaluator.dataset_meta = dict(gnd=GND)  # no dataset_name: bare metric names
    samples = []
    for i in range(N):
        s = DataSample(metainfo=dict(sample_idx=i, is_query=bool(is_query[i])))
        samples.append(s.set_embedding(torch.from_numpy(emb[i])))
    evaluator.process(data_samples=samples[:7], data_batch=None)
    evaluator.process(data_samples=samples[7:], data_batch=None)
    got = evaluator.evaluate(N)
    expected, _ = expected_metrics(emb[is_query], emb[~is_query], official_map, kappas=(1, ))
    assert got == pytest.approx({'mAP_H': expected['roxford5k/mAP_H'],
                                 'mP@1_H': expected['roxford5k/mP@1_H']}, rel=1e-9)


def test_compute_metrics_matches_evaluate():
    emb, is_query = make_data()
    metric = RevisitedMetric()
    metric.dataset_meta = META
    feed(metric, range(N), emb, is_query)
    got = metric.compute_metrics(metric.results)
    assert got == metric.evaluate(size=N)


def test_bad_configs_meta_and_samples():
    with pytest.raises(ValueError, match='protocols must be some of'):
        RevisitedMetric(protocols=('easy', 'extreme'))
    with pytest.raises(ValueError, match=r'^RevisitedMetric: kappas must hold positive integers, '
                                         r'got 0 in kappas=\(0,\)$'):
        RevisitedMetric(kappas=(0, ))
    with pytest.raises(ValueError, match=r'^RevisitedMetric: chunk_size must be None or a '
                                         r'positive integer, got True$'):
        RevisitedMetric(chunk_size=True)
    with pytest.raises(ValueError, match="query_expansion must be None or a dict with keys"):
        RevisitedMetric(query_expansion=dict(k=2, beta=1))
    emb, is_query = make_data()

    metric = RevisitedMetric()
    feed(metric, range(N), emb, is_query)
    with pytest.raises(KeyError, match="dataset_meta has no 'gnd'"):
        metric.evaluate(size=N)

    metric = RevisitedMetric()
    metric.dataset_meta = dict(gnd=GND[:2])
    feed(metric, range(N), emb, is_query)
    with pytest.raises(ValueError, match="3 samples have is_query=True but dataset_meta"):
        metric.evaluate(size=N)

    metric = RevisitedMetric()
    metric.dataset_meta = dict(gnd=GND[:2] + [dict(easy=[0], hard=[11], junk=[])])
    feed(metric, range(N), emb, is_query)
    with pytest.raises(ValueError, match=r"dataset_meta\['gnd'\]\[2\]\['hard'\] holds database "
                       r'index 11, but only 11 database samples'):
        metric.evaluate(size=N)

    sample = DataSample(metainfo=dict(sample_idx=0)).set_embedding(torch.zeros(8))
    with pytest.raises(KeyError, match="no 'is_query'"):
        RevisitedMetric().process(None, [sample])

    # A repeated sample_idx that changes sides is not padding.
    metric = RevisitedMetric()
    metric.dataset_meta = META
    feed(metric, range(N), emb, is_query)
    flipped = is_query.copy()
    flipped[2] = False
    feed(metric, [2], emb, flipped)
    with pytest.raises(ValueError, match='sample_idx 2 arrives with different is_query flags'):
        metric.evaluate(size=N)


def test_non_finite_embeddings_name_the_samples():
    emb, is_query = make_data()
    emb[QUERY_IDX[1], 3] = np.nan
    metric = RevisitedMetric()
    metric.dataset_meta = META
    feed(metric, range(N), emb, is_query)
    with pytest.raises(ValueError, match=r'^RevisitedMetric: the model gave non-finite .* for 1 '
                       rf'of {N} test images \(sample_idx {QUERY_IDX[1]}\)'):
        metric.evaluate(size=N)


@pytest.mark.parametrize('method', ['superglobal', 'kreciprocal', 'diffusion'])
def test_rerank_heads_the_ranking(official_map, method):
    """rerank=: the re-ranked shortlist first, then the rest by similarity, scored as the
    official code scores that full ranking."""
    from irtbox.evaluation.functional import rerank_search
    emb, is_query = make_data(seed=3)
    cfg = dict(type=method, shortlist=6, **dict(superglobal=dict(m=4, k=2),
                                                 kreciprocal=dict(k1=3, k2=2),
                                                 diffusion=dict(k=3, kq=2))[method])
    metric = RevisitedMetric(rerank=cfg, chunk_size=2)
    metric.dataset_meta = META
    feed(metric, range(N), emb, is_query)
    got = metric.evaluate(size=N)
    query, db = emb[is_query], emb[~is_query]
    head = rerank_search(cfg, query, db)[0]
    order = np.argsort(-(db.astype(np.float64) @ query.astype(np.float64).T), axis=0,
                       kind='stable')
    ranks = np.stack([np.r_[h, [j for j in o if j not in h]] for h, o in zip(head, order.T)], 1)
    for protocol, s in (('easy', 'E'), ('medium', 'M'), ('hard', 'H')):
        mean_ap = official_map(ranks, build_revisited_gnd(GND, protocol), (1, 5, 10))[0]
        assert got[f'roxford5k/mAP_{s}'] == pytest.approx(100 * mean_ap, rel=1e-9)
    with pytest.raises(ValueError, match='type one of'):
        RevisitedMetric(rerank=dict(type='dba'))
