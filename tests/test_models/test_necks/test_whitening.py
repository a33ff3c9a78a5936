import numpy as np
import pytest
import torch

from irtbox.evaluation.functional.whitening import apply_whitening, learn_whitening
from irtbox.models.necks import LearnedWhitening


def pairs(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) @ rng.normal(size=(d, d))
    q = np.arange(0, n, 2)
    x[q + 1] = x[q] + 0.1 * rng.normal(size=(len(q), d))  # matching pairs (q, q + 1)
    return torch.from_numpy(x), q.tolist(), (q + 1).tolist()


def test_learned_whitening_matches_the_function():
    x, q, p = pairs()
    neck = LearnedWhitening(in_dim=6, out_dim=4)
    neck.fit(x, q, p)
    m, proj = learn_whitening(x.numpy(), q, p)
    out = torch.nn.functional.normalize(neck.eval()(x.float()), dim=1)
    np.testing.assert_allclose(out.numpy(), apply_whitening(x.numpy(), m, proj, dim=4), atol=1e-4)


def test_pca_method_needs_no_pairs_and_learned_does():
    x, _, _ = pairs()
    neck = LearnedWhitening(in_dim=6, method='pca')
    neck.fit(x)
    assert bool(neck.fitted)
    with pytest.raises(ValueError, match='query/positive pairs'):
        LearnedWhitening(in_dim=6).fit(x)
    with pytest.raises(RuntimeError, match='WhiteningFitHook'):
        LearnedWhitening(in_dim=6).eval()(x.float())
