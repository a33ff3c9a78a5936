"""PMLMiner: the multi-similarity miner's pairs against PML and a brute force."""
import pytest
import torch

from irtbox.models.miners import PMLMiner
from irtbox.registry import MODELS

pml_miners = pytest.importorskip('pytorch_metric_learning.miners',
                                 reason='pytorch-metric-learning is not installed')


def batch(seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(6).repeat_interleave(4)
    labels = labels[torch.randperm(len(labels), generator=g)]  # classes interleaved
    # centres spread 1.5x the noise: some pairs are easy, some hard
    embeddings = 1.5 * torch.randn(6, 16, generator=g)[labels] + \
        torch.randn(len(labels), 16, generator=g)
    return embeddings.double(), labels


def pair_set(anchors, others):
    return set(zip(anchors.tolist(), others.tolist()))


def brute_force_multi_similarity(embeddings, labels, epsilon):
    """Wang et al. 2019, eq. 5-6 on cosine similarities: keep a negative
    (i, j) if S_ij + eps > min over the positives k of i of S_ik, and a
    positive (i, j) if S_ij - eps < max over the negatives k of i of S_ik."""
    z = torch.nn.functional.normalize(embeddings, dim=1)
    sim = (z @ z.T).tolist()
    n = len(labels)
    pos, neg = set(), set()
    for i in range(n):
        positives = [j for j in range(n) if j != i and labels[j] == labels[i]]
        negatives = [j for j in range(n) if labels[j] != labels[i]]
        if not positives or not negatives:
            continue
        hardest_pos = min(sim[i][j] for j in positives)
        hardest_neg = max(sim[i][j] for j in negatives)
        pos |= {(i, j) for j in positives if sim[i][j] - epsilon < hardest_neg}
        neg |= {(i, j) for j in negatives if sim[i][j] + epsilon > hardest_pos}
    return pos, neg


@pytest.mark.parametrize('seed', [0, 1, 2])
@pytest.mark.parametrize('epsilon', [0.1, 0.3])
def test_multi_similarity_pairs(seed, epsilon):
    embeddings, labels = batch(seed)
    miner = MODELS.build(dict(type='PMLMiner', name='MultiSimilarityMiner', epsilon=epsilon))
    a1, p, a2, n = miner(embeddings, labels)
    r1, rp, r2, rn = pml_miners.MultiSimilarityMiner(epsilon=epsilon)(embeddings, labels)
    pos, neg = pair_set(a1, p), pair_set(a2, n)
    assert len(pos) == len(a1) and len(neg) == len(a2)  # no duplicate
    assert pos == pair_set(r1, rp) and neg == pair_set(r2, rn)
    expected_pos, expected_neg = brute_force_multi_similarity(embeddings, labels, epsilon)
    assert pos == expected_pos and neg == expected_neg
    # the miner selects: some pairs are kept, some dropped
    all_pos = int((labels[:, None] == labels[None]).sum()) - len(labels)
    assert 0 < len(pos) < all_pos and 0 < len(neg) < len(labels) ** 2 - all_pos - len(labels)


def test_default_is_multi_similarity_with_epsilon_0_1():
    miner = PMLMiner()
    assert miner.name == 'MultiSimilarityMiner' and miner.pml_miner.epsilon == 0.1


def test_no_gradient_and_bad_inputs():
    embeddings, labels = batch(0)
    out = PMLMiner()(embeddings.requires_grad_(True), labels)
    assert all(not t.requires_grad and t.dtype == torch.long for t in out)
    with pytest.raises(ValueError, match=r"PMLMiner: name='Nope'.*MultiSimilarityMiner"):
        PMLMiner('Nope')
    with pytest.raises(TypeError, match='PMLMiner: cannot build'):
        PMLMiner(epsilon_typo=0.1)
    with pytest.raises(ValueError, match=r'PMLMiner\(MultiSimilarityMiner\): labels'):
        PMLMiner()(torch.randn(3, 4), torch.tensor([0, 1]))
