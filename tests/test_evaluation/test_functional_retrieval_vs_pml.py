"""MAP@R, R-precision and Precision@1 against PyTorch Metric Learning's AccuracyCalculator,
the evaluation code of the training-recipe benchmark (Musgrave et al. 2020; Berton et al.)."""
import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import retrieval_metrics

pml_accuracy = pytest.importorskip('pytorch_metric_learning.utils.accuracy_calculator')

METRICS = {'mean_average_precision_at_r': 'map@r', 'r_precision': 'r_precision',
           'precision_at_1': 'precision@1'}


def unit_rows(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize('seed, n, classes, dim', [(0, 120, 7, 8), (1, 300, 40, 16),
                                                   (2, 90, 45, 4)])
def test_leave_one_out_equals_pml(seed, n, classes, dim):
    # Continuous random data (no tied distances), unbalanced classes, some of a single image
    # (those queries are dropped by both).
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    emb = unit_rows(rng.normal(size=(classes, dim))[labels] + rng.normal(size=(n, dim)))
    emb = emb.astype(np.float32)
    calculator = pml_accuracy.AccuracyCalculator(include=tuple(METRICS), k='max_bin_count',
                                                 device=torch.device('cpu'))
    expected = calculator.get_accuracy(torch.from_numpy(emb), torch.from_numpy(labels))
    ours = retrieval_metrics(emb, labels, ks=(1, ), map_at_r=True)
    for pml_name, name in METRICS.items():
        assert ours[name] == pytest.approx(expected[pml_name], abs=1e-6), name


def test_query_gallery_equals_pml():
    rng = np.random.default_rng(3)
    q_labels, g_labels = rng.integers(0, 10, 50), rng.integers(0, 10, 200)
    centres = rng.normal(size=(10, 8))
    query = unit_rows(centres[q_labels] + rng.normal(size=(50, 8))).astype(np.float32)
    gallery = unit_rows(centres[g_labels] + rng.normal(size=(200, 8))).astype(np.float32)
    calculator = pml_accuracy.AccuracyCalculator(include=tuple(METRICS), k='max_bin_count',
                                                 device=torch.device('cpu'))
    expected = calculator.get_accuracy(torch.from_numpy(query), torch.from_numpy(q_labels),
                                       torch.from_numpy(gallery), torch.from_numpy(g_labels),
                                       ref_includes_query=False)
    ours = retrieval_metrics(query, q_labels, gallery, g_labels, ks=(1, ), map_at_r=True)
    for pml_name, name in METRICS.items():
        assert ours[name] == pytest.approx(expected[pml_name], abs=1e-6), name
