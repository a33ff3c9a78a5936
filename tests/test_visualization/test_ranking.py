"""analyze_queries / select_queries on hand-made embeddings whose ranking is known by construction."""
import math

import numpy as np
import pytest

from irtbox.visualization import (analyze_queries, label_ground_truth, select_queries,
                                  top1_failures)


def unit(degrees):
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


# The query at 0 degrees; gallery at 10, 20, 30, 40, 90 degrees: ranked in this order.
QUERY = np.array([unit(0)], dtype=np.float32)
GALLERY = np.array([unit(a) for a in (10, 20, 30, 40, 90)], dtype=np.float32)
GALLERY_LABELS = np.array([1, 0, 2, 0, 1])


def test_correct_wrong_ap_first_correct_and_confusions():
    gnd = label_ground_truth(np.array([0]), GALLERY_LABELS, [0])
    (rec, ) = analyze_queries(QUERY, GALLERY, [0], gnd, k=4, gallery_labels=GALLERY_LABELS)
    assert rec['results'].tolist() == [0, 1, 2, 3]
    assert rec['status'] == ['wrong', 'correct', 'wrong', 'correct']
    np.testing.assert_allclose(rec['scores'], [math.cos(math.radians(a)) for a in (10, 20, 30, 40)],
                               rtol=1e-5)
    # Positives at ranks 2 and 4: AP = (1/2 + 2/4) / 2.
    assert rec['ap'] == pytest.approx(0.5)
    assert rec['n_relevant'] == 2 and rec['first_correct'] == 2 and rec['failure']
    assert rec['confusions'] == [(1, 1)]


def test_junk_is_grey_and_skipped():
    gnd = [dict(ok=np.array([1, 3]), junk=np.array([0]))]
    (rec, ) = analyze_queries(QUERY, GALLERY, [0], gnd, k=5, gallery_labels=GALLERY_LABELS)
    assert rec['status'] == ['junk', 'correct', 'wrong', 'correct', 'wrong']
    # Junk removed: positives at 1 and 3 of (1, 2, 3, 4): AP = (1 + 2/3) / 2.
    assert rec['ap'] == pytest.approx((1 + 2 / 3) / 2)
    assert rec['first_correct'] == 2 and not rec['failure'] and rec['confusions'] == []


def test_query_without_any_correct_item():
    gnd = label_ground_truth(np.array([7]), GALLERY_LABELS, [0])
    (rec, ) = analyze_queries(QUERY, GALLERY, [0], gnd, k=3, gallery_labels=GALLERY_LABELS)
    assert math.isnan(rec['ap']) and rec['n_relevant'] == 0 and rec['first_correct'] is None
    assert rec['failure'] and rec['status'] == ['wrong'] * 3
    # No correct result: the confusions are the top-k's classes, most frequent first.
    assert rec['confusions'] == [(1, 1), (0, 1), (2, 1)]


def test_gallery_smaller_than_k():
    gnd = label_ground_truth(np.array([0]), GALLERY_LABELS, [0])
    (rec, ) = analyze_queries(QUERY, GALLERY, [0], gnd, k=50)
    assert rec['results'].tolist() == [0, 1, 2, 3, 4] and len(rec['status']) == 5


def test_leave_one_out_leaves_the_query_out():
    emb = np.array([unit(0), unit(5), unit(50), unit(60)], dtype=np.float32)
    labels = np.array([0, 1, 0, 1])
    gnd = label_ground_truth(labels, labels, [0, 1, 2, 3], exclude_self=True)
    recs = analyze_queries(emb, emb, [0, 1, 2, 3], gnd, k=3, exclude_self=True,
                           gallery_labels=labels)
    assert [r['results'].tolist() for r in recs] == [[1, 2, 3], [0, 2, 3], [3, 1, 0],
                                                     [2, 1, 0]]
    assert [r['n_relevant'] for r in recs] == [1, 1, 1, 1]
    # Its one positive at rank 2 (queries 0, 3) or 3 (queries 1, 2): AP 1/2 or 1/3.
    assert [r['ap'] for r in recs] == pytest.approx([1 / 2, 1 / 3, 1 / 3, 1 / 2])
    assert [r['first_correct'] for r in recs] == [2, 3, 3, 2]


def test_top1_failures_and_sample():
    emb = np.array([unit(0), unit(5), unit(50), unit(52), unit(100)], dtype=np.float32)
    labels = np.array([0, 1, 1, 1, 0])

    def gnd_of(rows):
        return label_ground_truth(labels, labels, rows, exclude_self=True)
    failed = top1_failures(emb, emb, np.arange(5), gnd_of, exclude_self=True)
    # Nearest: 0 -> 1 (wrong), 1 -> 0 (wrong), 2 -> 3, 3 -> 2, 4 -> 3 (wrong).
    assert failed.tolist() == [True, True, False, False, True]
    assert top1_failures(emb, emb, [4, 2], gnd_of, exclude_self=True).tolist() == [True, False]
    # Not leave-one-out: each query finds itself, which gnd_of lists as junk: no failure.
    assert not top1_failures(emb, emb, np.arange(5), gnd_of).any()
    a = select_queries(5, 2, failed, seed=3)
    assert a.tolist() == select_queries(5, 2, failed, seed=3).tolist()  # reproducible
    assert failed[a].sum() == 1  # half failures, half not
    assert select_queries(5, 9, failed).tolist() == [0, 1, 2, 3, 4]
    # Only failures left for the rest: they fill the sample.
    assert sorted(select_queries(5, 4, failed, seed=0).tolist()) == sorted(
        set(select_queries(5, 4, failed, seed=0).tolist()))
    assert failed[select_queries(5, 4, failed, seed=0)].sum() == 2
