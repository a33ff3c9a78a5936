import pytest
import torch
import torch.nn.functional as F

from irtbox.models.heads import EmbeddingHead
from irtbox.models.losses import ContrastiveLoss, KoLeoLoss, contrastive_loss, koleo_loss
from irtbox.registry import MODELS

Z = F.normalize(torch.randn(8, 4, generator=torch.Generator().manual_seed(0)), dim=1)
Y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def irt_r_head(**weights):
    return MODELS.build(dict(
        type='EmbeddingHead',
        losses=dict(contrastive=dict(type='ContrastiveLoss', margin=0.5, memory_size=16,
                                     embed_dim=4),
                    koleo=dict(type='KoLeoLoss')),
        loss_weights=weights or None))


def test_names_and_weights():
    head = irt_r_head(koleo=0.7)
    assert isinstance(head.losses['contrastive'], ContrastiveLoss)
    assert isinstance(head.losses['koleo'], KoLeoLoss)
    out = head.loss(Z, Y)
    assert list(out) == ['loss_contrastive', 'loss_koleo']
    assert out['loss_contrastive'].item() == pytest.approx(contrastive_loss(Z, Y, 0.5).item())
    assert out['loss_koleo'].item() == pytest.approx(0.7 * koleo_loss(Z).item())


def test_default_weights_are_one():
    out = irt_r_head().loss(Z, Y)
    assert out['loss_koleo'].item() == pytest.approx(koleo_loss(Z).item())


def test_zero_weight_is_not_computed():
    head = irt_r_head(contrastive=0, koleo=2.0)
    out = head.loss(Z, Y)
    assert list(out) == ['loss_koleo']
    assert int(head.losses['contrastive'].memory.num_steps) == 0  # never called


def test_memory_embeddings_go_only_to_losses_that_use_a_memory():
    head = irt_r_head()
    keys = F.normalize(torch.randn(8, 4), dim=1)
    head.loss(Z, Y, memory_embeddings=keys)  # KoLeoLoss.forward would reject the keyword
    assert torch.equal(head.losses['contrastive'].memory.get()[0], keys)
    with pytest.raises(ValueError, match='memory_embeddings were given .* no loss uses a memory'):
        EmbeddingHead(losses=dict(koleo=KoLeoLoss())).loss(Z, Y, memory_embeddings=keys)


def test_losses_declare_the_memory_instead_of_a_signature():
    """The head reads ``uses_memory``, not the forward's parameters."""

    class Spy(torch.nn.Module):
        uses_memory = True

        def forward(self, embeddings, labels, **kwargs):
            self.kwargs = kwargs
            return embeddings.sum() * 0

    head = EmbeddingHead(losses=dict(spy=Spy(), koleo=KoLeoLoss()))
    head.loss(Z, Y)
    assert head.losses['spy'].kwargs == dict(memory_embeddings=None)
    keys = F.normalize(torch.randn(8, 4), dim=1)
    head.loss(Z, Y, memory_embeddings=keys)
    assert head.losses['spy'].kwargs['memory_embeddings'] is keys


def test_gradients_flow_through_weighted_sum():
    z = Z.clone().requires_grad_()
    out = irt_r_head(koleo=0.7).loss(z, Y)
    sum(out.values()).backward()
    ref = Z.clone().requires_grad_()
    (contrastive_loss(ref, Y, 0.5) + 0.7 * koleo_loss(ref)).backward()
    assert torch.allclose(z.grad, ref.grad, atol=1e-6)


def test_built_modules_are_accepted():
    head = EmbeddingHead(losses=dict(koleo=KoLeoLoss()))
    assert head.loss(Z, Y)['loss_koleo'].item() == pytest.approx(koleo_loss(Z).item())


def test_memory_in_state_dict():
    keys = set(irt_r_head().state_dict())
    assert 'losses.contrastive.memory.embeddings' in keys
    assert 'losses.contrastive.memory.labels' in keys


def test_bad_configs():
    with pytest.raises(KeyError, match=r"'kleo'.*\['contrastive', 'koleo'\]"):
        irt_r_head(kleo=0.7)
    with pytest.raises(ValueError, match=r"^EmbeddingHead: loss_weights\['koleo'\] must be a "
                                         r'non-negative number, got -1$'):
        irt_r_head(koleo=-1)
    with pytest.raises(ValueError, match='non-empty dict'):
        EmbeddingHead(losses={})
    with pytest.raises(ValueError, match=r"losses\['koleo'\] must be a config dict with a type"):
        EmbeddingHead(losses=dict(koleo=dict(eps=1e-8)))
    with pytest.raises(ValueError, match='identifier'):
        EmbeddingHead(losses={'ko.leo': dict(type='KoLeoLoss')})
