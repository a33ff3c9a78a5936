import math

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import (build_revisited_gnd, rank_database, revisited_map,
                                          revisited_means, revisited_metrics)


def column(*items):
    """A one-query ranks array (n_db x 1)."""
    return np.array(items, dtype=np.int64)[:, None]


def test_trapezoid_ap_positives_at_0_and_2():
    # Positives 5 and 3 at positions 0 and 2:
    # (1 + 1/1)/4 + (1/2 + 2/3)/4 = 12/24 + 7/24.
    mean_ap, aps, mpr, prs = revisited_map(column(5, 7, 3, 9, 1), [dict(ok=[5, 3])])
    assert mean_ap == pytest.approx(19 / 24, abs=1e-15)
    assert round(mean_ap, 4) == 0.7917
    assert aps.shape == (1, ) and aps[0] == pytest.approx(19 / 24, abs=1e-15)
    # 1-based positions [1, 3]: P@1 = 1/1; P@5 and P@10 use kq = 3: 2/3.
    np.testing.assert_allclose(prs, [[1, 2 / 3, 2 / 3]], atol=1e-15)
    np.testing.assert_allclose(mpr, [1, 2 / 3, 2 / 3], atol=1e-15)


def test_junk_removal_shifts_positions():
    # Junk 0 and 8 at positions 0 and 3, positives at 1 and 4 -> 0 and 2 after removal.
    ranks = column(0, 5, 7, 8, 3, 9)
    _, aps, _, prs = revisited_map(ranks, [dict(ok=[5, 3], junk=[0, 8])])
    assert aps[0] == pytest.approx(19 / 24, abs=1e-15)
    np.testing.assert_allclose(prs[0], [1, 2 / 3, 2 / 3], atol=1e-15)
    # Without the junk list, positions 1 and 4: (0/1 + 1/2)/4 + (1/4 + 2/5)/4.
    _, aps, _, _ = revisited_map(ranks, [dict(ok=[5, 3])])
    assert aps[0] == pytest.approx((0 + 1 / 2) / 4 + (1 / 4 + 2 / 5) / 4, abs=1e-15)
    # An item listed as both positive and junk is not junk before itself
    # (official code): positions 0 and 2 -> 0 and 1.
    _, aps, _, _ = revisited_map(column(5, 7, 3), [dict(ok=[5, 3], junk=[5])])
    assert aps[0] == pytest.approx(1.0, abs=1e-15)
    # Junk ranked after the last positive changes nothing.
    _, aps, _, _ = revisited_map(ranks, [dict(ok=[0, 5], junk=[9])])
    assert aps[0] == pytest.approx(1.0, abs=1e-15)


def test_mp_at_k_quirk():
    # Positives at 1-based positions 1 and 2: kq = min(2, k) -> P@5 = P@10 = 1,
    # where the textbook P@5 would be 2/5.
    _, _, _, prs = revisited_map(column(4, 2, 0, 1, 3, 5, 6, 7, 8, 9, 10, 11), [dict(ok=[4, 2])])
    np.testing.assert_allclose(prs[0], [1, 1, 1], atol=0)
    # Positives at 1-based 2 and 7: P@1 = 0/1, P@5 = 1/5, P@10: kq = 7 -> 2/7.
    ranks = column(0, 4, 1, 2, 3, 5, 9, 6, 7, 8)
    _, _, _, prs = revisited_map(ranks, [dict(ok=[4, 9])], kappas=(1, 5, 10))
    np.testing.assert_allclose(prs[0], [0, 1 / 5, 2 / 7], atol=1e-15)


def test_empty_ground_truth_is_left_out():
    ranks = np.stack([[5, 7, 3, 9, 1], [1, 3, 5, 7, 9], [9, 1, 3, 5, 7]], axis=1)
    gnd = [dict(ok=[5, 3]), dict(ok=[], junk=[1]), dict(ok=[9])]
    mean_ap, aps, mpr, prs = revisited_map(ranks, gnd)
    assert math.isnan(aps[1]) and np.isnan(prs[1]).all()
    assert aps[0] == pytest.approx(19 / 24) and aps[2] == 1.0
    assert mean_ap == pytest.approx((19 / 24 + 1) / 2, abs=1e-15)  # over 2, not 3
    np.testing.assert_allclose(mpr, (prs[0] + prs[2]) / 2)
    # Nothing to average at all: NaN.
    mean_ap, aps, mpr, _ = revisited_map(ranks[:, 1:2], [dict(ok=[])])
    assert math.isnan(mean_ap) and np.isnan(mpr).all()


def test_truncated_ranking_counts_missing_positives():
    # Only the top 3 of the ranking; positive 8 lies below: n = 2.
    _, aps, _, prs = revisited_map(column(5, 1, 2), [dict(ok=[5, 8])])
    assert aps[0] == pytest.approx(0.5, abs=1e-15)
    np.testing.assert_allclose(prs[0], [1, 1, 1])
    # No positive found at all: 0, not a failure.
    _, aps, _, prs = revisited_map(column(1, 2, 3), [dict(ok=[8])])
    assert aps[0] == 0 and (prs[0] == 0).all()


def random_case(rng, n_db, n_q, full=True):
    ranks = np.stack([rng.permutation(n_db) for _ in range(n_q)], axis=1)
    if not full:
        ranks = ranks[:n_db // 2]
    gnd_raw = []
    for _ in range(n_q):
        perm = rng.permutation(n_db)
        a, b, c = rng.integers(0, 6, size=3)
        gnd_raw.append(dict(easy=perm[:a], hard=perm[a:a + b], junk=perm[a + b:a + b + c]))
    return ranks, gnd_raw


@pytest.mark.slow
@pytest.mark.parametrize('full', [True, False])
def test_against_slow_reference_on_random_rankings(official_map, full):
    rng = np.random.default_rng(0)
    for trial in range(20):
        ranks, gnd_raw = random_case(rng, n_db=30, n_q=9, full=full)
        for protocol in ('easy', 'medium', 'hard'):
            gnd = build_revisited_gnd(gnd_raw, protocol)
            kappas = (1, 3, 5, 10)
            got = revisited_map(ranks, gnd, kappas)
            expected = official_map(ranks, gnd, kappas)
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-15)
            # Chunks of queries combine to the same means.
            parts = [revisited_map(ranks[:, s:s + 4], gnd[s:s + 4], kappas) for s in (0, 4, 8)]
            aps = np.concatenate([p[1] for p in parts])
            prs = np.concatenate([p[3] for p in parts])
            mean_ap, mpr = revisited_means(aps, prs)
            np.testing.assert_allclose(mean_ap, got[0], rtol=1e-12)
            np.testing.assert_allclose(mpr, got[2], rtol=1e-12)


def test_tensor_ranks_and_int_kappas():
    ranks = torch.tensor([[5], [7], [3]])
    mean_ap, _, mpr, prs = revisited_map(ranks, [dict(ok=torch.tensor([5, 3]))], kappas=2)
    assert mean_ap == pytest.approx(19 / 24)
    assert prs.shape == (1, 1) and mpr[0] == 0.5  # 1-based [1, 3], kq = min(3, 2): 1 of 2


def test_build_revisited_gnd():
    gnd_raw = [dict(easy=[1, 2], hard=[3], junk=[4, 5], bbx=[0, 0, 1, 1]),
               dict(easy=np.array([], dtype=np.int64), hard=[7, 6], junk=[])]
    easy = build_revisited_gnd(gnd_raw, 'easy')
    medium = build_revisited_gnd(gnd_raw, 'medium')
    hard = build_revisited_gnd(gnd_raw, 'hard')
    expect = {
        'easy': [([1, 2], [4, 5, 3]), ([], [7, 6])],
        'medium': [([1, 2, 3], [4, 5]), ([7, 6], [])],
        'hard': [([3], [4, 5, 1, 2]), ([7, 6], [])],
    }
    for got, name in ((easy, 'easy'), (medium, 'medium'), (hard, 'hard')):
        assert len(got) == 2
        for g, (ok, junk) in zip(got, expect[name]):
            assert g['ok'].dtype == np.int64 and g['junk'].dtype == np.int64
            assert g['ok'].tolist() == ok and g['junk'].tolist() == junk
    # A missing junk list means no junk.
    assert build_revisited_gnd([dict(easy=[1], hard=[2])], 'hard')[0]['junk'].tolist() == [1]


def test_bad_ground_truth_and_ranks():
    with pytest.raises(ValueError, match="protocol must be one of"):
        build_revisited_gnd([], 'difficult')
    with pytest.raises(KeyError, match=r"gnd\[1\] has no 'hard'"):
        build_revisited_gnd([dict(easy=[1], hard=[2], junk=[]), dict(easy=[3], junk=[])],
                            'medium')
    with pytest.raises(ValueError, match=r"gnd\[0\] lists database image\(s\) \[2\]"):
        build_revisited_gnd([dict(easy=[1, 2], hard=[2], junk=[])], 'medium')
    with pytest.raises(ValueError, match=r"gnd\[0\]\['junk'\] holds a negative"):
        build_revisited_gnd([dict(easy=[1], hard=[2], junk=[-1])], 'easy')
    with pytest.raises(ValueError, match=r"gnd\[0\]\['easy'\] must be a 1-D list of integer"):
        build_revisited_gnd([dict(easy=[1.5], hard=[2], junk=[])], 'easy')
    with pytest.raises(ValueError, match='2 entries'):
        revisited_map(column(1, 2), [dict(ok=[1]), dict(ok=[2])])
    with pytest.raises(ValueError, match='must be 2-D'):
        revisited_map(np.arange(3), [dict(ok=[1])])
    with pytest.raises(TypeError, match='integer database indices'):
        revisited_map(np.zeros((3, 1)), [dict(ok=[1])])
    with pytest.raises(KeyError, match=r"gnd\[0\] must be a dict with an 'ok'"):
        revisited_map(column(1, 2), [dict(easy=[1])])
    with pytest.raises(ValueError, match=r"gnd\[0\]\['ok'\] repeats"):
        revisited_map(column(1, 2), [dict(ok=[1, 1])])
    with pytest.raises(ValueError, match='kappas must hold positive integers'):
        revisited_map(column(1, 2), [dict(ok=[1])], kappas=(0, ))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('chunk_size', [1, 4, 100])
def test_rank_database_matches_stable_full_argsort(dtype, chunk_size):
    rng = np.random.default_rng(3)
    # Small integers: exact products and many ties.
    db = rng.integers(-1, 2, size=(40, 3)).astype(dtype)
    query = rng.integers(-1, 2, size=(9, 3)).astype(dtype)
    expected = np.argsort(-(db @ query.T), axis=0, kind='stable')
    got = rank_database(query, db, chunk_size=chunk_size)
    assert got.dtype == np.int64 and got.shape == (40, 9)
    np.testing.assert_array_equal(got, expected)
    got_t = rank_database(torch.from_numpy(query), torch.from_numpy(db), chunk_size=chunk_size)
    assert isinstance(got_t, torch.Tensor)
    np.testing.assert_array_equal(got_t.numpy(), expected)


def test_rank_database_bad_input():
    with pytest.raises(ValueError, match='dimension 3 but db_emb has 4'):
        rank_database(np.zeros((2, 3)), np.zeros((5, 4)))
    with pytest.raises(ValueError, match='database is empty'):
        rank_database(np.zeros((2, 3)), np.zeros((0, 3)))
    with pytest.raises(ValueError, match='NaN or infinite'):
        rank_database(np.full((2, 3), np.nan), np.zeros((5, 3)))
    with pytest.raises(ValueError, match='chunk_size must be a positive integer'):
        rank_database(np.zeros((2, 3)), np.zeros((5, 3)), chunk_size=0)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('chunk_size', [1, 4, 64])
def test_revisited_metrics_equal_the_full_ranking(dtype, chunk_size):
    # Coarse embeddings: many exact ties between positives, junk and the rest.
    rng = np.random.default_rng(5)
    db = rng.integers(-1, 2, size=(400, 3)).astype(dtype)
    query = rng.integers(-1, 2, size=(9, 3)).astype(dtype)
    raw = []
    for i in range(9):
        picked = rng.choice(400, size=60, replace=False)
        raw.append(dict(easy=picked[:i * 3], hard=picked[30:30 + i], junk=picked[40:40 + 2 * i]))
    raw[4]['junk'] = np.r_[raw[4]['junk'], raw[4]['easy'][:2]]  # ok and junk at once
    gnds = {p: build_revisited_gnd(raw, p) for p in ('easy', 'medium', 'hard')}
    got = revisited_metrics(query, db, gnds, kappas=(1, 3, 10), chunk_size=chunk_size)
    ranks = rank_database(query, db)
    for p, gnd in gnds.items():
        want = revisited_map(ranks, gnd, kappas=(1, 3, 10))
        assert got[p][0] == pytest.approx(want[0], abs=1e-15, nan_ok=True)
        for g, w in zip(got[p][1:], want[1:]):
            np.testing.assert_allclose(g, w, atol=1e-15)


def test_revisited_metrics_bad_input():
    db = np.eye(4, dtype=np.float32)
    with pytest.raises(ValueError, match=r"^gnds\['medium'\]\[0\]\['ok'\] holds database index 7"):
        revisited_metrics(db[:1], db, {'medium': [dict(ok=[7])]})
    with pytest.raises(ValueError, match="gnds\\['medium'\\] has 1 entries but there are 2"):
        revisited_metrics(db[:2], db, {'medium': [dict(ok=[1])]})
    with pytest.raises(ValueError, match='database is empty'):
        revisited_metrics(db[:1], db[:0], {'medium': [dict(ok=[])]})


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize('chunk_size', [1, 3])
def test_bad_database_found_in_the_similarities(bad, chunk_size):
    """The database is not scanned up front: a NaN / inf entry is found in the similarity
    block, even where the query is 0 in that dimension (0 x inf = NaN), in any chunk."""
    rng = np.random.default_rng(0)
    query = rng.standard_normal((5, 4)).astype(np.float32)
    query[:, 2] = 0
    db = rng.standard_normal((30, 4)).astype(np.float32)
    db[17, 2] = bad
    gnd = {'medium': [dict(ok=[0])] * 5}
    with pytest.raises(ValueError, match='^db_emb contains NaN or infinite'):
        revisited_metrics(query, db, gnd, chunk_size=chunk_size)
    with pytest.raises(ValueError, match='^db_emb contains NaN or infinite'):
        rank_database(query, db, chunk_size=chunk_size)


def test_overflowing_similarities_are_an_error():
    db = np.full((3, 2), 3e38, dtype=np.float32)
    with pytest.raises(ValueError, match='^inner products overflow float32 .* db_emb'):
        revisited_metrics(db[:1], db, {'medium': [dict(ok=[0])]})
