"""NonFiniteLossHook with gradient accumulation: a non-finite loss drops its accumulation
window and leaves the windows after it where they were."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from torch import nn

from irtbox.engine import NonFiniteLossHook

ITERS = 8


def train(wrapper_type, losses_scaled_by=None, device='cpu', accumulative_counts=2):
    """Train a linear model ``ITERS`` iterations, ``accumulative_counts`` per accumulation
    window, through the hook's guarded ``update_params``; ``losses_scaled_by[i]`` multiplies
    the loss of iteration i (1-based). Returns (iterations that stepped, the wrapper's count
    after each iteration, final weights)."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1).to(device)
    x = torch.randn(4, 3, device=device)
    wrapper = wrapper_type(optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                           accumulative_counts=accumulative_counts)
    wrapper.initialize_count_status(model, 0, ITERS)
    NonFiniteLossHook(max_skipped=ITERS).before_train(SimpleNamespace(optim_wrapper=wrapper))
    steps, counts, step = [], [], wrapper.step
    for i in range(1, ITERS + 1):
        wrapper.step = lambda i=i, **kwargs: steps.append(i) or step(**kwargs)
        with wrapper.optim_context(model):
            loss = model(x).pow(2).mean()
        wrapper.update_params(loss * (losses_scaled_by or {}).get(i, 1.0))
        counts.append(wrapper._inner_count)
    return steps, counts, model.weight.detach().cpu()


def check_window_dropped(wrapper_type, device='cpu'):
    clean_steps, clean_counts, _ = train(wrapper_type, device=device)
    assert clean_steps == [2, 4, 6, 8] and clean_counts == list(range(1, ITERS + 1))
    # Iterations 3 and 4 are one window: the optimizer does not step for it, wherever in it
    # the NaN is, and the later windows step where they did.
    zeroed = train(wrapper_type, {3: 0.0, 4: 0.0}, device)[2]
    for nan_at in (3, 4):
        steps, counts, weight = train(wrapper_type, {nan_at: float('nan')}, device)
        assert steps == [2, 6, 8]
        assert counts == clean_counts
        # Nothing of the dropped window (finite part included) reaches the later steps:
        # the weights are those of a run whose window 3-4 had zero gradients.
        assert torch.isfinite(weight).all()
        torch.testing.assert_close(weight, zeroed)


def test_a_non_finite_loss_drops_its_accumulation_window():
    check_window_dropped(OptimWrapper)


def test_without_accumulation_only_the_iteration_is_dropped():
    steps, counts, _ = train(OptimWrapper, {3: float('inf')}, accumulative_counts=1)
    assert steps == [1, 2, 4, 5, 6, 7, 8] and counts == list(range(1, ITERS + 1))


@pytest.mark.gpu
def test_amp_wrapper_drops_the_window_on_a_gpu():
    check_window_dropped(AmpOptimWrapper, 'cuda')
