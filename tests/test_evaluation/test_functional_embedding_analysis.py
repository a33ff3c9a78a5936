import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import (cumulative_energy, effective_dimension,
                                          similarity_histograms)
from irtbox.evaluation.functional import embedding_analysis


def anisotropic(seed=0, n=300, dim=12):
    """Correlated descriptors with a spread of variances and a non-zero mean."""
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(dim, dim)) * np.geomspace(3, 0.05, dim)[:, None]
    return rng.normal(size=(n, dim)) @ mix + rng.normal(size=dim) * 5


def reference_energy(x):
    eig = np.sort(np.linalg.eigvalsh(np.cov(x, rowvar=False)))[::-1]
    return np.cumsum(eig) / eig.sum()


@pytest.mark.parametrize('block', [4096, 7])
def test_cumulative_energy_matches_eigvalsh_of_cov(monkeypatch, block):
    # A small block exercises the accumulation of the scatter matrix over several blocks.
    monkeypatch.setattr(embedding_analysis, '_SCATTER_BLOCK', block)
    x = anisotropic()
    energy = cumulative_energy(x)
    assert energy.dtype == np.float64 and energy.shape == (12, )
    np.testing.assert_allclose(energy, reference_energy(x), rtol=1e-10)
    assert energy[-1] == 1.0 and (np.diff(energy) >= 0).all()


def test_cumulative_energy_of_tensors_and_float32():
    x = anisotropic(seed=1).astype(np.float32)
    expected = reference_energy(x.astype(np.float64))
    np.testing.assert_allclose(cumulative_energy(x), expected, rtol=1e-6)
    np.testing.assert_allclose(cumulative_energy(torch.from_numpy(x)), expected, rtol=1e-6)


def test_cumulative_energy_of_rank_k_data_reaches_one_at_k():
    rng = np.random.default_rng(2)
    k, dim = 3, 10
    # Rank k around a shared offset: centring removes the offset, k directions remain.
    x = rng.normal(size=(80, k)) @ rng.normal(size=(k, dim)) + rng.normal(size=dim)
    energy = cumulative_energy(x)
    np.testing.assert_allclose(energy[k - 1:], 1.0, atol=1e-12)
    assert energy[k - 2] < 0.999
    assert effective_dimension(energy, 1.0) == k


def test_effective_dimension_definition():
    energy = np.array([0.5, 0.8, 0.95, 1.0])
    for fraction in (0.1, 0.5, 0.6, 0.8, 0.9, 0.95, 0.99, 1.0):
        expected = min(k for k in range(1, 5) if energy[k - 1] >= fraction)
        assert effective_dimension(energy, fraction) == expected
    assert effective_dimension(torch.tensor(energy), 0.9) == 3


@pytest.mark.parametrize('energy,fraction,message', [
    (np.ones((2, 2)), 0.9, 'non-empty 1-D'),
    (np.array([]), 0.9, 'non-empty 1-D'),
    (np.array([0.5, np.nan]), 0.9, 'NaN'),
    (np.array([0.5, 1.0]), 0.0, r'\(0, 1\]'),
    (np.array([0.5, 1.0]), 1.5, r'\(0, 1\]'),
    (np.array([0.5, 0.7]), 0.9, 'never reaches 0.9'),
])
def test_effective_dimension_bad_input(energy, fraction, message):
    with pytest.raises(ValueError, match=message):
        effective_dimension(energy, fraction)


@pytest.mark.parametrize('x,error,message', [
    (np.ones(5), ValueError, 'must be 2-D'),
    (np.ones((1, 4)), ValueError, 'at least 2'),
    (np.ones((3, 0)), ValueError, '0 columns'),
    (np.array([[0.0, 1.0], [np.inf, 0.0]]), ValueError, 'NaN or infinite'),
    (np.array([['a', 'b'], ['c', 'd']]), TypeError, 'real numbers'),
    ([[0.0, 1.0], [1.0, 0.0]], TypeError, 'numpy array or a torch tensor'),
    (np.ones((4, 3)), ValueError, 'all identical'),
])
def test_cumulative_energy_bad_input(x, error, message):
    with pytest.raises(error, match=message):
        cumulative_energy(x)


def border_set(seed=3):
    """~50 descriptors whose similarities include exact 1.0, -1.0, 0.0 and other bin edges:
    duplicated rows (same and different labels), opposite rows, axis vectors, (0.6, 0.8)."""
    rng = np.random.default_rng(seed)
    dim = 6
    axes = np.eye(dim)
    tilted = np.zeros((2, dim))
    tilted[0, :2] = (0.6, 0.8)
    tilted[1, 2:4] = (-0.8, 0.6)
    random = rng.normal(size=(30, dim))
    random /= np.linalg.norm(random, axis=1, keepdims=True)
    x = np.concatenate([axes, -axes[:3], tilted, random, random[:4], -random[4:7]])
    labels = np.concatenate([np.arange(dim) % 3, [0, 1, 2], [4, 5], rng.integers(0, 6, 30),
                             rng.integers(0, 6, 4), rng.integers(0, 6, 3)])
    return x, labels


def reference_histograms(x, labels, pairs, bins, low, high, normalize=True):
    """Brute force, one pair at a time; bins by their edges (left-closed, last also right)."""
    edges = np.linspace(low, high, bins + 1)
    if normalize:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    counts = {True: np.zeros(bins, dtype=np.int64), False: np.zeros(bins, dtype=np.int64)}
    values = {True: [], False: []}
    for i, j in pairs:
        s = float(np.dot(x[i], x[j]))
        if normalize:
            s = min(max(s, -1.0), 1.0)
        positive = bool(labels[i] == labels[j])
        values[positive].append(s)
        if low <= s <= high:
            b = bins - 1 if s == high else int(np.searchsorted(edges, s, side='right')) - 1
            counts[positive][b] += 1
    return edges, counts, values


def check_against_reference(result, reference):
    edges, counts, values = reference
    np.testing.assert_array_equal(result['edges'], edges)
    np.testing.assert_array_equal(result['positive'], counts[True])
    np.testing.assert_array_equal(result['negative'], counts[False])
    assert result['num_positive'] == len(values[True])
    assert result['num_negative'] == len(values[False])
    assert result['mean_positive'] == pytest.approx(np.mean(values[True]), abs=1e-12)
    assert result['mean_negative'] == pytest.approx(np.mean(values[False]), abs=1e-12)


@pytest.mark.parametrize('chunk_size', [1, 7, 50, 1024])
def test_similarity_histograms_all_pairs_match_brute_force(chunk_size):
    x, labels = border_set()
    n = len(x)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    reference = reference_histograms(x, labels, pairs, 200, -1.0, 1.0)
    # The borders are really hit: pairs at exactly 1.0 (last bin) and -1.0 (first bin).
    assert 1.0 in reference[2][True] and 1.0 in reference[2][False]
    assert -1.0 in reference[2][False]
    result = similarity_histograms(x, labels, chunk_size=chunk_size)
    check_against_reference(result, reference)
    assert result['num_positive'] + result['num_negative'] == n * (n - 1) // 2
    assert result['exact'] and result['positive'][-1] > 0 and result['negative'][0] > 0
    np.testing.assert_array_equal(result['query_rows'], np.arange(n))


@pytest.mark.parametrize('chunk_size', [1, 5, 1024])
def test_similarity_histograms_query_gallery_pairs(chunk_size):
    x, labels = border_set(seed=4)
    query = np.zeros(len(x), dtype=bool)
    query[::3] = True
    pairs = [(i, j) for i in np.flatnonzero(query) for j in np.flatnonzero(~query)]
    result = similarity_histograms(torch.from_numpy(x).float(), torch.from_numpy(labels),
                                   bins=40, chunk_size=chunk_size, query_mask=query.tolist())
    # float32 input: compare after the same cast.
    reference = reference_histograms(x.astype(np.float32).astype(np.float64), labels, pairs,
                                     40, -1.0, 1.0)
    check_against_reference(result, reference)
    np.testing.assert_array_equal(result['query_rows'], np.flatnonzero(query))


def test_similarity_histograms_raw_dot_products_and_narrow_range():
    x, labels = border_set(seed=5)
    x = x * np.linspace(0.5, 2.0, len(x))[:, None]
    n = len(x)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    reference = reference_histograms(x, labels, pairs, 30, -0.5, 1.5, normalize=False)
    result = similarity_histograms(x, labels, bins=30, range=(-0.5, 1.5), chunk_size=8,
                                   normalize=False)
    check_against_reference(result, reference)
    # Values outside the range are in no bin but still counted and averaged.
    assert result['positive'].sum() + result['negative'].sum() < n * (n - 1) // 2


def test_similarity_histograms_sampled_rows():
    x, labels = border_set(seed=6)
    n = len(x)
    result = similarity_histograms(x, labels, bins=50, max_queries=9, seed=1, chunk_size=4)
    rows = result['query_rows']
    assert not result['exact'] and len(rows) == 9 and len(set(rows.tolist())) == 9
    # Each sampled row is paired with every other descriptor.
    pairs = [(i, j) for i in rows for j in range(n) if j != i]
    check_against_reference(result, reference_histograms(x, labels, pairs, 50, -1.0, 1.0))
    again = similarity_histograms(x, labels, bins=50, max_queries=9, seed=1)
    np.testing.assert_array_equal(again['query_rows'], rows)
    other = similarity_histograms(x, labels, bins=50, max_queries=9, seed=2)
    assert not np.array_equal(other['query_rows'], rows)
    # Asking for at least every row is the exact computation.
    full = similarity_histograms(x, labels, bins=50, max_queries=n)
    exact = similarity_histograms(x, labels, bins=50)
    assert full['exact']
    np.testing.assert_array_equal(full['positive'], exact['positive'])
    np.testing.assert_array_equal(full['negative'], exact['negative'])


def test_similarity_histograms_without_positive_pairs():
    x, _ = border_set()
    result = similarity_histograms(x, np.arange(len(x)))
    assert result['num_positive'] == 0 and np.isnan(result['mean_positive'])
    assert result['positive'].sum() == 0


@pytest.mark.parametrize('kwargs,error,message', [
    (dict(embeddings=np.ones(4)), ValueError, 'must be 2-D'),
    (dict(embeddings=np.ones((1, 3)), labels=[0]), ValueError, 'at least 2'),
    (dict(embeddings=np.array([[1.0, np.nan], [0.0, 1.0]]), labels=[0, 1]), ValueError, 'NaN'),
    (dict(embeddings=np.array([[1.0, 0.0], [0.0, 0.0]]), labels=[0, 1]), ValueError,
     'row 1 is zero'),
    (dict(labels=[0, 1]), ValueError, 'one entry per embedding'),
    (dict(bins=0), ValueError, 'bins must be a positive integer'),
    (dict(bins=2.5), ValueError, 'bins must be a positive integer'),
    (dict(range=(1.0, -1.0)), ValueError, 'low < high'),
    (dict(chunk_size=0), ValueError, 'chunk_size'),
    (dict(max_queries=0), ValueError, 'max_queries'),
    (dict(query_mask=np.ones(4, dtype=bool)), ValueError, '4 queries and 0 gallery'),
    (dict(query_mask=np.arange(4)), TypeError, 'booleans'),
    (dict(query_mask=[True]), ValueError, 'query_mask must be 1-D'),
])
def test_similarity_histograms_bad_input(kwargs, error, message):
    args = dict(embeddings=np.eye(4), labels=[0, 0, 1, 1])
    args.update(kwargs)
    with pytest.raises(error, match=message):
        similarity_histograms(**args)


def brute_force_ground_truth(query, database, gnd, bins, low, high):
    """One (query, database) pair at a time, with its own bin search."""
    edges = np.linspace(low, high, bins + 1)
    counts = {True: np.zeros(bins, dtype=np.int64), False: np.zeros(bins, dtype=np.int64)}
    values = {True: [], False: []}
    for i, q in enumerate(query):
        for j, d in enumerate(database):
            if j in set(gnd[i].get('junk', [])):
                continue
            cos = float(np.dot(q, d) / (np.linalg.norm(q) * np.linalg.norm(d)))
            cos = min(1.0, max(-1.0, cos))
            kind = j in set(gnd[i]['ok'])
            values[kind].append(cos)
            if low <= cos <= high:
                counts[kind][min(int(np.searchsorted(edges, cos, side='right')) - 1, bins - 1)] += 1
    return counts, values


@pytest.mark.parametrize('chunk_size', [1, 2, 100])
def test_ground_truth_histograms_match_brute_force(chunk_size):
    from irtbox.evaluation.functional import build_revisited_gnd, ground_truth_histograms
    rng = np.random.default_rng(3)
    query, database = rng.normal(size=(4, 5)), rng.normal(size=(13, 5))
    database[2] = query[0] * 3.0  # similarity exactly 1 (last bin)
    database[5] = -query[1]       # similarity exactly -1 (first bin)
    raw = [dict(easy=[2, 7], hard=[1], junk=[3]), dict(easy=[], hard=[5, 6], junk=[]),
           dict(easy=[0], hard=[], junk=[4, 8, 9]), dict(easy=[12], hard=[11], junk=[2])]
    gnd = build_revisited_gnd(raw, 'medium')
    result = ground_truth_histograms(query, database, gnd, bins=10, chunk_size=chunk_size)
    counts, values = brute_force_ground_truth(query, database, raw_medium(raw), 10, -1.0, 1.0)
    np.testing.assert_array_equal(result['positive'], counts[True])
    np.testing.assert_array_equal(result['negative'], counts[False])
    assert result['num_positive'] == len(values[True]) == 8
    assert result["num_negative"] == len(values[False]) == 4 * 13 - 8 - 5  # 5 junk pairs
    assert result['mean_positive'] == pytest.approx(np.mean(values[True]), abs=1e-12)
    assert result['mean_negative'] == pytest.approx(np.mean(values[False]), abs=1e-12)
    assert result['positive'][-1] >= 1 and result['negative'][0] >= 1


def raw_medium(raw):
    """The Medium protocol written out: positives easy + hard, junk junk."""
    return [dict(ok=list(g['easy']) + list(g['hard']), junk=list(g['junk'])) for g in raw]


def test_ground_truth_histograms_bad_input():
    from irtbox.evaluation.functional import ground_truth_histograms
    q, db = np.ones((2, 3)), np.ones((4, 3))
    with pytest.raises(ValueError, match='gnd has 1 entries for 2 queries'):
        ground_truth_histograms(q, db, [dict(ok=[0])])
    with pytest.raises(ValueError, match=r"gnd\[1\]\['junk'\] has indices outside the 4"):
        ground_truth_histograms(q, db, [dict(ok=[0]), dict(ok=[1], junk=[4])])
    with pytest.raises(TypeError, match=r"gnd\[0\] must be a dict with 'ok'"):
        ground_truth_histograms(q, db, [[0], dict(ok=[1])])
    with pytest.raises(ValueError, match='query has dimension 3 but database has 2'):
        ground_truth_histograms(q, np.ones((4, 2)), [dict(ok=[0]), dict(ok=[1])])
