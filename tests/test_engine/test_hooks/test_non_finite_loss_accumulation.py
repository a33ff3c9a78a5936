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


def test_the_loss_flag_is_read_after_the_backward_is_queued():
    """The skip decision reads one flag on the host; on a GPU that waits for the GPU, so it
    is read after the backward was queued, not before (where the GPU would sit idle while
    the host waits and only then queues the backward)."""
    from tests.gpu_semantics import host_reads
    model = nn.Linear(3, 1)
    wrapper = OptimWrapper(optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    NonFiniteLossHook().before_train(SimpleNamespace(optim_wrapper=wrapper))
    loss = model(torch.randn(4, 3)).pow(2).mean()
    events = []
    backward = wrapper.backward
    wrapper.backward = lambda *args, **kwargs: events.append('backward') or backward(
        *args, **kwargs)
    with host_reads(events):
        wrapper.update_params(loss)
    assert events == ['backward', 'read']


def test_skips_keep_the_buffers_in_host_memory(tmp_path):
    """max_skipped > 0 copies the buffers before each iteration to roll a skipped one back;
    the copy lives on the host (on the GPU it doubled a cross-batch memory's size), and a
    module's host copies of its counters are read again after a roll-back."""
    from irtbox.models.losses.xbm import CrossBatchMemory
    model = nn.Module()
    model.memory = CrossBatchMemory(size=4, embed_dim=2)
    hook = NonFiniteLossHook(max_skipped=1)
    runner = SimpleNamespace(model=model, iter=0, logger=SimpleNamespace(warning=lambda m: None),
                             work_dir=str(tmp_path))
    hook.before_train_iter(runner, 0)
    assert all(b.device.type == 'cpu' for b in hook._buffers.values())
    model.memory.step(torch.ones(3, 2), torch.arange(3))  # the skipped iteration's forward
    hook._skip_this_iter = True
    hook.after_train_iter(runner, 0, outputs={'loss': torch.tensor(float('nan'))})
    assert int(model.memory.num_filled) == 0 and model.memory._filled == 0
    model.memory.step(torch.ones(1, 2), torch.tensor([5]))
    assert model.memory.labels[0] == 5 and int(model.memory.ptr) == 1
