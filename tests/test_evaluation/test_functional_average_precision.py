import math

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import (average_precision, rank_database, revisited_map,
                                          search_average_precision)


def slow_average_precision(ranks, gnd):
    """Non-interpolated AP, one ranked item at a time: junk skipped, precision
    summed at every positive, divided by the number of positives not junk."""
    aps = []
    for i, g in enumerate(gnd):
        junk = {int(v) for v in g.get('junk', [])}
        ok = {int(v) for v in g['ok']} - junk
        if not ok:
            aps.append(math.nan)
            continue
        seen, hits, total = 0, 0, 0.0
        for item in ranks[:, i]:
            if int(item) in junk:
                continue
            seen += 1
            if int(item) in ok:
                hits += 1
                total += hits / seen
        aps.append(total / len(ok))
    return np.array(aps)


def column(*items):
    return np.array(items, dtype=np.int64)[:, None]


def test_hand_computed_positives_at_0_and_2():
    ranks = column(5, 3, 7, 1, 0)
    aps = average_precision(ranks, [dict(ok=[7, 5])])
    assert aps.shape == (1, )
    assert aps[0] == pytest.approx((1 / 1 + 2 / 3) / 2)  # 0.8333
    # The official trapezoid AP of the same ranking is different (0.7917).
    assert revisited_map(ranks, [dict(ok=[7, 5])])[0] == pytest.approx(
        ((1 + 1) / 2 + (1 / 2 + 2 / 3) / 2) / 2)


def test_junk_before_a_positive_shifts_it():
    ranks = column(4, 5, 3, 7, 1)
    # Without junk the positives sit at 1 and 3: (1/2 + 2/4) / 2.
    assert average_precision(ranks, [dict(ok=[5, 7])])[0] == pytest.approx((1 / 2 + 2 / 4) / 2)
    # Junk 4 removed: they move to 0 and 2.
    assert average_precision(ranks, [dict(ok=[5, 7], junk=[4])])[0] == pytest.approx(
        (1 + 2 / 3) / 2)
    # Junk after the last positive changes nothing; junk between them moves the second only.
    assert average_precision(ranks, [dict(ok=[5, 7], junk=[1])])[0] == pytest.approx(
        (1 / 2 + 2 / 4) / 2)
    assert average_precision(ranks, [dict(ok=[5, 7], junk=[3])])[0] == pytest.approx(
        (1 / 2 + 2 / 3) / 2)


def test_item_both_positive_and_junk_is_junk():
    ranks = column(4, 5, 3, 7, 1)
    # 4 is ignored, so 5 and 7 are the positives, at 0 and 2.
    aps = average_precision(ranks, [dict(ok=[4, 5, 7], junk=[4])])
    assert aps[0] == pytest.approx((1 + 2 / 3) / 2)


def test_no_positives_is_nan_and_left_out():
    ranks = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]])
    aps = average_precision(ranks, [dict(ok=[1]), dict(ok=[]), dict(ok=[2], junk=[2])])
    assert aps[0] == pytest.approx(1 / 2)
    assert np.isnan(aps[1]) and np.isnan(aps[2])
    assert np.nanmean(aps) == pytest.approx(1 / 2)


def test_truncated_ranking_counts_missing_positives():
    # Three positives, two in the top rows (at 0 and 1): (1 + 1 + 0) / 3.
    aps = average_precision(column(8, 2, 6), [dict(ok=[2, 8, 9])])
    assert aps[0] == pytest.approx(2 / 3)
    assert average_precision(column(6, 3), [dict(ok=[2])])[0] == 0


@pytest.mark.parametrize('seed', range(5))
def test_matches_slow_reference_on_random_data(seed):
    rng = np.random.default_rng(seed)
    n_db, n_q = 40, 12
    ranks = np.stack([rng.permutation(n_db) for _ in range(n_q)], axis=1)
    gnd = []
    for i in range(n_q):
        ok = rng.choice(n_db, size=rng.integers(0, 8), replace=False)
        junk = rng.choice(n_db, size=rng.integers(0, 6), replace=False)  # may overlap ok
        gnd.append(dict(ok=ok, junk=junk) if i % 3 else dict(ok=ok))
    np.testing.assert_allclose(average_precision(ranks, gnd), slow_average_precision(ranks, gnd),
                               rtol=1e-12, equal_nan=True)
    top = ranks[:15]  # a truncated ranking
    np.testing.assert_allclose(average_precision(top, gnd), slow_average_precision(top, gnd),
                               rtol=1e-12, equal_nan=True)


def test_matches_scikit_learn_without_junk():
    metrics = pytest.importorskip('sklearn.metrics')
    rng = np.random.default_rng(3)
    q, db = rng.normal(size=(6, 5)), rng.normal(size=(30, 5))
    labels_q, labels_db = rng.integers(0, 3, 6), rng.integers(0, 3, 30)
    ranks = rank_database(q, db, chunk_size=4)
    gnd = [dict(ok=np.flatnonzero(labels_db == label)) for label in labels_q]
    expected = [metrics.average_precision_score(labels_db == label, sims)
                for label, sims in zip(labels_q, q @ db.T)]
    np.testing.assert_allclose(average_precision(ranks, gnd), expected, rtol=1e-9)


def test_tensor_ranks():
    ranks = torch.tensor([[5], [3], [7]])
    assert average_precision(ranks, [dict(ok=torch.tensor([7, 5]))])[0] == pytest.approx(
        (1 + 2 / 3) / 2)


def test_bad_input():
    ranks = column(0, 1, 2)
    with pytest.raises(ValueError, match=r'^ranks has 1 columns .* gnd has 2'):
        average_precision(ranks, [dict(ok=[0]), dict(ok=[1])])
    with pytest.raises(ValueError, match='^ranks must be 2-D'):
        average_precision(np.arange(3), [dict(ok=[0])])
    with pytest.raises(KeyError, match=r"gnd\[0\] must be a dict with an 'ok'"):
        average_precision(ranks, [dict(junk=[0])])
    with pytest.raises(ValueError, match=r"^gnd\[0\]\['ok'\] repeats"):
        average_precision(ranks, [dict(ok=[1, 1])])
    with pytest.raises(ValueError, match=r"gnd\[0\]\['junk'\] holds a negative"):
        average_precision(ranks, [dict(ok=[1], junk=[-1])])


@pytest.mark.parametrize('chunk_size', [1, 5, None])
def test_search_average_precision_equals_the_full_ranking(chunk_size):
    # Coarse embeddings: exact ties between positives, junk and the rest; ok and junk overlap.
    rng = np.random.default_rng(7)
    gallery = rng.integers(-1, 2, size=(300, 3)).astype(np.float32)
    query = rng.integers(-1, 2, size=(12, 3)).astype(np.float32)
    gnd = []
    for i in range(12):
        picked = rng.choice(300, size=40, replace=False)
        gnd.append(dict(ok=picked[:3 * i], junk=np.r_[picked[30:30 + i], picked[:i // 3]]))
    want = average_precision(rank_database(query, gallery), gnd)
    got = search_average_precision(query, gallery, gnd, chunk_size=chunk_size)
    np.testing.assert_allclose(got, want, atol=1e-15)
    assert np.isnan(got[0])
