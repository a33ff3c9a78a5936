"""PMLLoss against PyTorch Metric Learning itself (same inputs, same weights)
and, for the contrastive loss, against a brute-force formula."""
import math

import pytest
import torch

from irtbox.models.losses import PML_CLASSIFICATION_LOSSES, PML_CONTRASTIVE_LOSSES, PMLLoss
from irtbox.models.losses.pml_equivalents import PMLArcFaceLoss, PMLNormalizedSoftmaxLoss
from irtbox.models.miners import PMLMiner
from irtbox.registry import MODELS

pml_losses = pytest.importorskip('pytorch_metric_learning.losses',
                                 reason='pytorch-metric-learning is not installed')
pml_miners = pytest.importorskip('pytorch_metric_learning.miners')

NUM_CLASSES, DIM = 5, 8


def batch(seed=0, m=4, dtype=torch.float64):
    """5 classes x m images around random class centres, unnormalised (PML
    normalises), spread so that the miner keeps some pairs and drops others."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(NUM_CLASSES).repeat_interleave(m)
    labels = labels[torch.randperm(len(labels), generator=g)]  # classes interleaved
    centres = torch.randn(NUM_CLASSES, DIM, generator=g, dtype=dtype)
    embeddings = centres[labels] + torch.randn(len(labels), DIM, generator=g, dtype=dtype)
    return embeddings, labels


def value_and_grads(loss_fn, params, embeddings, labels):
    embeddings = embeddings.clone().requires_grad_(True)
    value = loss_fn(embeddings, labels)
    grads = torch.autograd.grad(value, [embeddings] + list(params))
    return value.detach(), grads


def kwargs_for(name):
    return dict(num_classes=NUM_CLASSES, embedding_size=DIM) \
        if name in PML_CLASSIFICATION_LOSSES else {}


@pytest.mark.parametrize('name,mined', [(name, mined) for name in PML_CONTRASTIVE_LOSSES
                                         for mined in (True, False)] +
                         [(name, False) for name in PML_CLASSIFICATION_LOSSES])
def test_value_and_gradients_match_pml(name, mined):
    """The 12 benchmark losses with their default miner ('auto': the
    multi-similarity miner for the contrastive ones, none for classification)
    or, for the contrastive ones, with none."""
    classification = name in PML_CLASSIFICATION_LOSSES
    ours = MODELS.build(dict(type='PMLLoss', name=name, miner='auto' if mined else None,
                             **kwargs_for(name))).double()
    reference = getattr(pml_losses, name)(**kwargs_for(name)).double()
    # fresh random weights, copied into the PML object
    g = torch.Generator().manual_seed(1)
    for (our_name, ours_p), (ref_name, ref_p) in zip(ours.pml_loss.named_parameters(),
                                                     reference.named_parameters()):
        assert our_name == ref_name
        with torch.no_grad():
            ours_p.copy_(torch.randn(ours_p.shape, generator=g, dtype=ours_p.dtype))
            ref_p.copy_(ours_p)
    assert (len(list(ours.parameters())) == 1) == classification
    miner = pml_miners.MultiSimilarityMiner() if mined else None

    def run_reference(embeddings, labels):
        return reference(embeddings, labels,
                         None if miner is None else miner(embeddings, labels))

    embeddings, labels = batch()
    value, grads = value_and_grads(ours, ours.parameters(), embeddings, labels)
    ref_value, ref_grads = value_and_grads(run_reference, reference.parameters(), embeddings,
                                           labels)
    # non-trivial inputs, so a wrong loss, miner or weight cannot pass unseen
    assert value.item() > 0 and grads[0].abs().sum() > 0
    torch.testing.assert_close(value, ref_value, rtol=1e-10, atol=1e-12)
    assert len(grads) == len(ref_grads) == 1 + classification
    for ours_g, ref_g in zip(grads, ref_grads):
        torch.testing.assert_close(ours_g, ref_g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('name,kwargs', [
    ('ArcFaceLoss', {}), ('ArcFaceLoss', dict(margin=10.0, scale=16)),
    ('NormalizedSoftmaxLoss', {}), ('NormalizedSoftmaxLoss', dict(temperature=0.2))])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_one_formula_for_arcface_and_normsoftmax_equal_to_pml(name, kwargs, dtype):
    """PMLLoss runs irtbox's own ArcFace / normalised softmax formula (one
    implementation each), in PML's form: the same initial weights from the
    same seed (N(0, 1), D x C), the same hyper-parameters (ArcFace's margin in
    degrees) and the same value and gradients as PML's classes."""
    kwargs = dict(kwargs_for(name), **kwargs)
    torch.manual_seed(5)
    ours = PMLLoss(name, **kwargs).to(dtype)
    torch.manual_seed(5)
    reference = getattr(pml_losses, name)(**kwargs).to(dtype)
    assert isinstance(ours.pml_loss, (PMLArcFaceLoss, PMLNormalizedSoftmaxLoss))
    assert torch.equal(ours.pml_loss.W, reference.W)
    embeddings, labels = batch(seed=7, dtype=dtype)
    value, grads = value_and_grads(ours, ours.parameters(), embeddings, labels)
    ref_value, ref_grads = value_and_grads(
        lambda e, y: reference(e, y), reference.parameters(), embeddings, labels)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(value, ref_value, **tol)
    for ours_g, ref_g in zip(grads, ref_grads):
        torch.testing.assert_close(ours_g, ref_g, **tol)


def test_auto_miner_is_multi_similarity_for_contrastive_losses_only():
    for name in PML_CONTRASTIVE_LOSSES:
        miner = PMLLoss(name).miner
        assert isinstance(miner, PMLMiner) and miner.name == 'MultiSimilarityMiner'
        assert miner.pml_miner.epsilon == 0.1
    for name in PML_CLASSIFICATION_LOSSES:
        assert PMLLoss(name, **kwargs_for(name)).miner is None
    # and the miner changes the value (the pairs it drops count without it)
    embeddings, labels = batch()
    assert PMLLoss('ContrastiveLoss')(embeddings, labels).item() != pytest.approx(
        PMLLoss('ContrastiveLoss', miner=None)(embeddings, labels).item())


def test_defaults_are_the_benchmark_hyper_parameters():
    """The defaults of docs/methods/dml_benchmark.md ("The 12 losses"), read off the losses."""

    def built(name):
        return PMLLoss(name, **kwargs_for(name)).pml_loss

    expected = {
        'ContrastiveLoss': dict(pos_margin=0, neg_margin=1),
        'CircleLoss': dict(m=0.4, gamma=80),
        'MultiSimilarityLoss': dict(alpha=2, beta=50, base=0.5),
        'NTXentLoss': dict(temperature=0.07),
        'SignalToNoiseRatioContrastiveLoss': dict(pos_margin=0, neg_margin=1),
        'ThresholdConsistentMarginLoss': dict(lambda_plus=1, lambda_minus=1, margin_plus=0.9,
                                              margin_minus=0.5),
        'TripletMarginLoss': dict(margin=0.05, triplets_per_anchor='all'),
        'ArcFaceLoss': dict(margin=math.radians(28.6), scale=64),
        'CosFaceLoss': dict(margin=0.35, scale=64),
        'NormalizedSoftmaxLoss': dict(temperature=0.05),
        'ProxyAnchorLoss': dict(margin=0.1, alpha=32),
        # PML stores 1 / gamma
        'SoftTripleLoss': dict(centers_per_class=10, la=20, gamma=1 / 0.1, margin=0.01),
    }
    assert sorted(expected) == sorted(PML_CONTRASTIVE_LOSSES + PML_CLASSIFICATION_LOSSES)
    for name, values in expected.items():
        loss = built(name)
        for key, value in values.items():
            assert getattr(loss, key) == pytest.approx(value) if not isinstance(value, str) \
                else getattr(loss, key) == value, (name, key)


def test_contrastive_without_miner_is_the_brute_force_formula():
    """Hadsell et al. on L2 distances of the normalised embeddings, PML's
    default reduction: mean of the non-zero terms, positives and negatives
    separately, over all ordered pairs i != j."""
    embeddings, labels = batch(seed=3)
    z = torch.nn.functional.normalize(embeddings, dim=1)
    pos, neg = [], []
    for i in range(len(z)):
        for j in range(len(z)):
            if i == j:
                continue
            d = (z[i] - z[j]).norm()
            if labels[i] == labels[j]:
                pos.append(max(d.item() - 0, 0))
            else:
                neg.append(max(1 - d.item(), 0))

    def mean_nonzero(values):
        values = [v for v in values if v > 0]
        return sum(values) / len(values) if values else 0.0

    expected = mean_nonzero(pos) + mean_nonzero(neg)
    assert expected > 0
    got = PMLLoss('ContrastiveLoss', miner=None)(embeddings, labels).item()
    assert got == pytest.approx(expected, rel=1e-10)


def test_classifier_parameters_share_one_optimizer_key():
    """One custom key ('pml_loss') reaches the weights of every classification
    loss, and each holds exactly the documented parameter."""
    names = {name: [n for n, _ in PMLLoss(name, **kwargs_for(name)).named_parameters()]
             for name in PML_CLASSIFICATION_LOSSES}
    assert names == {
        'ArcFaceLoss': ['pml_loss.W'], 'CosFaceLoss': ['pml_loss.W'],
        'NormalizedSoftmaxLoss': ['pml_loss.W'], 'ProxyAnchorLoss': ['pml_loss.proxies'],
        'SoftTripleLoss': ['pml_loss.fc']
    }


def test_bf16_embeddings_run_in_float32():
    embeddings, labels = batch(dtype=torch.float32)
    loss = PMLLoss('MultiSimilarityLoss')
    low = embeddings.bfloat16()
    out = loss(low, labels)
    assert out.dtype == torch.float32
    assert out.item() == pytest.approx(loss(low.float(), labels).item(), rel=1e-6)


def test_no_mined_pair_gives_zero_with_a_graph():
    embeddings = torch.randn(4, DIM, requires_grad=True)
    out = PMLLoss('MultiSimilarityLoss')(embeddings, torch.arange(4))
    out.backward()
    assert out.item() == 0 and torch.equal(embeddings.grad, torch.zeros_like(embeddings))


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"PMLLoss: name='Nope'.*MultiSimilarityLoss"):
        PMLLoss('Nope')
    with pytest.raises(TypeError, match='PMLLoss: cannot build .*ArcFaceLoss'):
        PMLLoss('ArcFaceLoss')
    with pytest.raises(ValueError, match="miner must be .*'auto'"):
        PMLLoss('ContrastiveLoss', miner='ms')
    with pytest.raises(TypeError, match="PMLLoss: cannot build ArcFaceLoss .*'reducer'"):
        PMLLoss('ArcFaceLoss', num_classes=3, embedding_size=4, reducer=None)
    with pytest.raises(ValueError, match="name='NormalizedSoftmaxLoss' .* takes no miner"):
        PMLLoss('NormalizedSoftmaxLoss', num_classes=3, embedding_size=4,
                miner=dict(type='PMLMiner'))
    loss = PMLLoss('ArcFaceLoss', num_classes=3, embedding_size=4)
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 3\).*\[0, 3\]'):
        loss(torch.randn(2, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match='embedding_size=4'):
        loss(torch.randn(2, 5), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='PMLLoss: labels must be an integer tensor'):
        PMLLoss('ContrastiveLoss')(torch.randn(2, 4), torch.tensor([0., 1.]))


@pytest.mark.parametrize('name', PML_CONTRASTIVE_LOSSES)
def test_sizes_are_checks_for_losses_without_weights(name):
    torch.manual_seed(0)
    embeddings, labels = torch.randn(8, DIM), torch.arange(4).repeat(2)
    checked = PMLLoss(name, embedding_size=DIM, num_classes=4)
    assert list(checked.parameters()) == []
    torch.testing.assert_close(checked(embeddings, labels), PMLLoss(name)(embeddings, labels))
    with pytest.raises(ValueError, match=f'embedding_size={DIM} but .* dimension {DIM + 1}'):
        checked(torch.randn(8, DIM + 1), labels)
    with pytest.raises(ValueError, match=r'labels must lie in \[0, 4\)'):
        checked(embeddings, labels + 1)


def test_missing_library_is_named(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, 'pytorch_metric_learning', None)
    with pytest.raises(ImportError, match='^PMLLoss: PyTorch Metric Learning is not installed: '
                                          'pip install pytorch-metric-learning'):
        PMLLoss('ContrastiveLoss')
