import importlib

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import recall_at_k, recall_from_relevance, retrieval_metrics
from irtbox.evaluation.neighbours import ExactSearcher, FaissSearcher

EXACT = pytest.mark.parametrize('searcher', [ExactSearcher, FaissSearcher],
                                ids=['torch', 'faiss'])


def on_circle(degrees):
    rad = np.deg2rad(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(rad), np.sin(rad)], axis=1).astype(np.float32)


# Five points on the unit circle; cosine similarity orders neighbours by angle.
ANGLES = [0, 10, 30, 100, 110]
LABELS = [0, 1, 0, 1, 1]


@EXACT
def test_leave_one_out_hand_computed(searcher):
    # Neighbour labels (self excluded), by hand from the angles:
    # q0 (label 0): 10°→1, 30°→0, ...   first hit at rank 2
    # q1 (label 1): 0°→0, 30°→0, 100°→1  first hit at rank 3
    # q2 (label 0): 10°→1, 0°→0          first hit at rank 2
    # q3, q4 (label 1): each other first  first hit at rank 1
    got = recall_at_k(on_circle(ANGLES), LABELS, ks=(1, 2, 3), searcher=searcher())
    assert got == pytest.approx({1: 2 / 5, 2: 4 / 5, 3: 5 / 5})


def test_query_gallery_hand_computed():
    # q0 at 0° (label 0) sees 20°(1), 40°(0), ... -> first hit at rank 2.
    # q1 at 90° (label 1) sees 95°(1) first -> hit at rank 1.
    # K = 10 exceeds the gallery (4 items): the whole gallery is searched.
    queries, query_labels = on_circle([0, 90]), [0, 1]
    gallery, gallery_labels = on_circle([20, 40, 80, 95]), [1, 0, 0, 1]
    got = recall_at_k(queries, query_labels, gallery, gallery_labels, ks=(1, 2, 10))
    assert got == pytest.approx({1: 0.5, 2: 1.0, 10: 1.0})


def test_exact_duplicates_excluded_by_index():
    # Items 0 and 1 are the same vector with different labels; item 2 is far.
    # Query 1's true nearest neighbour is item 0 (label 0): a miss at K=1.
    # Dropping "column 0" instead would drop item 0 and keep query 1 itself.
    emb = on_circle([0, 0, 90])
    got = recall_at_k(emb, [0, 1, 1], ks=(1, 2))
    assert got == pytest.approx({1: 0.0, 2: 2 / 3})


def test_singleton_query_counts_as_miss():
    # A sixth point at 240°, alone in its class, is far from all others
    # (the others keep their neighbours): recall@1 = 2 hits / 6 queries.
    got = recall_at_k(on_circle(ANGLES + [240]), LABELS + [7], ks=(1, ))
    assert got[1] == pytest.approx(2 / 6)


def test_relevance_matrix_recall():
    relevant = np.array([[0, 0, 1], [1, 0, 0], [0, 0, 0], [0, 1, 1]], dtype=bool)
    got = recall_from_relevance(relevant, ks=(1, 2, 3, 5))
    assert got == pytest.approx({1: 1 / 4, 2: 2 / 4, 3: 3 / 4, 5: 3 / 4})


def slow_recall(query, query_labels, gallery, gallery_labels, ks, leave_one_out):
    """Per query: full sort of all similarities, then look for a label match."""
    hits = {k: 0 for k in ks}
    for i, q in enumerate(query):
        sims = gallery.astype(np.float64) @ q.astype(np.float64)
        candidates = [j for j in range(len(gallery)) if not (leave_one_out and j == i)]
        ranked = sorted(candidates, key=lambda j: (-sims[j], j))
        for k in ks:
            hits[k] += any(gallery_labels[j] == query_labels[i] for j in ranked[:k])
    return {k: hits[k] / len(query) for k in ks}


@EXACT
def test_against_slow_implementation(searcher):
    rng = np.random.default_rng(3)
    emb = rng.integers(-1, 2, size=(90, 3)).astype(np.float32)  # ties and duplicates
    labels = rng.integers(0, 6, size=90)
    ks = (1, 2, 4, 8, 200)
    got = recall_at_k(emb, labels, ks=ks, searcher=searcher(chunk_size=16), normalize=False)
    assert got == pytest.approx(slow_recall(emb, labels, emb, labels, ks, True))
    got = recall_at_k(emb[:30], labels[:30], emb[30:], labels[30:], ks=ks,
                      searcher=searcher(chunk_size=16), normalize=False)
    assert got == pytest.approx(
        slow_recall(emb[:30], labels[:30], emb[30:], labels[30:], ks, False))


def test_torch_inputs():
    emb, labels = on_circle(ANGLES), LABELS
    got = recall_at_k(torch.from_numpy(emb), torch.tensor(labels), ks=(1, 2))
    assert got == recall_at_k(emb, np.array(labels), ks=(1, 2))


def test_one_search_feeds_every_metric(monkeypatch):
    exact = importlib.import_module('irtbox.evaluation.neighbours.exact')
    searches, selected = [], []
    blocks, topk = exact.similarity_blocks, exact.stable_topk

    def spy_blocks(*args, **kwargs):
        searches.append(args[2])
        return blocks(*args, **kwargs)

    def spy_topk(sims, k):
        selected.append(k)
        return topk(sims, k)

    monkeypatch.setattr(exact, 'similarity_blocks', spy_blocks)
    monkeypatch.setattr(exact, 'stable_topk', spy_topk)
    labels = np.array([0] * 7 + [1] * 3)
    emb = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    metrics = retrieval_metrics(emb, labels, ks=(1, 2, 9), map_at_r=True,
                                searcher=ExactSearcher(chunk_size=4))
    assert searches == [4]  # one search, in chunks of 4 queries
    assert selected == [6, 6, 6]  # per chunk, only the top max R (R = 7 - 1) is selected
    assert set(metrics) == {'recall@1', 'recall@2', 'recall@9', 'map@r', 'r_precision',
                            'precision@1'}


def test_bad_inputs():
    emb = on_circle(ANGLES)
    with pytest.raises(ValueError, match='one label per'):
        recall_at_k(emb, LABELS[:4])
    with pytest.raises(ValueError, match=r'ks must hold positive integers, got 0 in ks=\(0,\)'):
        recall_at_k(emb, LABELS, ks=(0, ))
    with pytest.raises(ValueError, match='both gallery_emb and gallery_labels'):
        recall_at_k(emb, LABELS, gallery_emb=emb)
    with pytest.raises(TypeError):
        recall_at_k(emb, LABELS, exclude_self=False)
