import numpy as np
import pytest

from irtbox.evaluation.functional import map_at_r, map_at_r_from_relevance
from irtbox.evaluation.neighbours import ExactSearcher, FaissSearcher

EXACT = pytest.mark.parametrize('searcher', [ExactSearcher, FaissSearcher],
                                ids=['torch', 'faiss'])


def on_circle(degrees):
    rad = np.deg2rad(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(rad), np.sin(rad)], axis=1).astype(np.float32)


# Five points on the unit circle; cosine similarity orders neighbours by angle.
ANGLES = [0, 10, 30, 100, 110]
LABELS = [0, 1, 0, 1, 1]


def test_protocols_example():
    # docs/protocols.md (MAP@R): neighbour labels [0, 1, 0, 0, 1] for a label-0 query with
    # R = 3 -> (1/3)(1/1 + 0 + 2/3) = 0.5556.
    expected = (1 / 3) * (1 / 1 + 0 + 2 / 3)
    got = map_at_r_from_relevance(np.array([[1, 0, 1, 1, 0]], dtype=bool), np.array([3]))
    assert got['map@r'] == pytest.approx(expected)
    assert round(got['map@r'], 4) == 0.5556
    assert got['r_precision'] == pytest.approx(2 / 3)
    assert got['precision@1'] == 1.0

    # The same case through a real search: gallery at increasing angles.
    gallery = on_circle([10, 20, 30, 40, 50])
    got = map_at_r(on_circle([0]), [0], gallery, [0, 1, 0, 0, 1])
    assert got['map@r'] == pytest.approx(expected)


@EXACT
def test_leave_one_out_hand_computed(searcher):
    # R = 1 for the label-0 points, 2 for the label-1 points. Neighbour labels:
    # q0: [1, ...] -> AP 0; q1: [0, 0] -> AP 0; q2: [1] -> AP 0;
    # q3 (100°): 110°(1), 30°(0) -> AP (1/2)(1/1) = 0.5, RP 1/2, P@1 1; q4 alike.
    got = map_at_r(on_circle(ANGLES), LABELS, searcher=searcher())
    assert got == pytest.approx({'map@r': 1.0 / 5, 'r_precision': 1.0 / 5,
                                 'precision@1': 2 / 5})


def test_singleton_queries_are_dropped():
    # A 240° point alone in its class leaves every other ranking's top R
    # unchanged; dropped, it leaves the means as they were (counted as 0 it
    # would turn 1/5 into 1/6).
    got = map_at_r(on_circle(ANGLES + [240]), LABELS + [7])
    assert got == pytest.approx({'map@r': 1.0 / 5, 'r_precision': 1.0 / 5,
                                 'precision@1': 2 / 5})


def test_query_gallery_hand_computed():
    # q0 (0°, label 0, R=2): gallery labels by rank [1, 0, 0, 1] -> AP (1/2)(1/2)
    # q1 (90°, label 1, R=2): [1, 0, 0, 1] -> AP (1/2)(1/1)
    got = map_at_r(on_circle([0, 90]), [0, 1], on_circle([20, 40, 80, 95]), [1, 0, 0, 1])
    assert got == pytest.approx({'map@r': (0.25 + 0.5) / 2, 'r_precision': 0.5,
                                 'precision@1': 0.5})


def test_exact_duplicates_excluded_by_index():
    # Items 0, 1 identical with labels 0, 1; items 2, 3 identical, labels 0, 1.
    # q0 (label 0, R=1): item 1 (label 1) ranks first -> AP 0. Same for every
    # query: its twin has the other label. Dropping "column 0" would keep
    # the query itself for q1 and q3 and give AP 1 there.
    emb = on_circle([0, 0, 90, 90])
    got = map_at_r(emb, [0, 1, 0, 1])
    assert got == pytest.approx({'map@r': 0.0, 'r_precision': 0.0, 'precision@1': 0.0})


def test_no_query_with_a_class_mate_gives_nan():
    with pytest.warns(UserWarning, match='no query'):
        got = map_at_r(on_circle([0, 50, 100]), [0, 1, 2])
    assert all(np.isnan(v) for v in got.values())


def test_too_few_neighbours_is_an_error():
    with pytest.raises(ValueError, match='needs the top max'):
        map_at_r_from_relevance(np.ones((2, 2), dtype=bool), np.array([3, 1]))


def slow_map_at_r(query, query_labels, gallery, gallery_labels, leave_one_out):
    """Full stable argsort per query and the textbook sums, in plain Python."""
    aps, rps, p1s = [], [], []
    for i, q in enumerate(query):
        sims = gallery.astype(np.float64) @ q.astype(np.float64)
        if leave_one_out:
            sims[i] = -np.inf
        order = np.lexsort((np.arange(len(gallery)), -sims))
        if leave_one_out:
            order = order[:-1]  # self, at -inf, sorts last
        rel = [int(gallery_labels[j] == query_labels[i]) for j in order]
        r = sum(rel)
        if r == 0:
            continue
        ap = 0.0
        for j in range(1, r + 1):
            ap += rel[j - 1] * sum(rel[:j]) / j
        aps.append(ap / r)
        rps.append(sum(rel[:r]) / r)
        p1s.append(rel[0])
    return {'map@r': np.mean(aps), 'r_precision': np.mean(rps), 'precision@1': np.mean(p1s)}


@EXACT
@pytest.mark.parametrize('seed', [0, 1])
def test_against_slow_implementation(searcher, seed):
    rng = np.random.default_rng(seed)
    emb = rng.integers(-1, 2, size=(120, 4)).astype(np.float32)  # ties and duplicates
    labels = rng.integers(0, 9, size=120)
    labels[:3] = [100, 101, 102]  # singletons
    got = map_at_r(emb, labels, searcher=searcher(chunk_size=32), normalize=False)
    assert got == pytest.approx(slow_map_at_r(emb, labels, emb, labels, True))
    got = map_at_r(emb[:40], labels[:40], emb[40:], labels[40:],
                   searcher=searcher(chunk_size=32), normalize=False)
    assert got == pytest.approx(slow_map_at_r(emb[:40], labels[:40], emb[40:], labels[40:],
                                              False))


def test_random_floats_against_slow_implementation():
    rng = np.random.default_rng(5)
    emb = rng.standard_normal((200, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    labels = rng.integers(0, 12, size=200)
    got = map_at_r(emb, labels)
    assert got == pytest.approx(slow_map_at_r(emb, labels, emb, labels, True), abs=1e-6)
