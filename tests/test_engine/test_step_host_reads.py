"""The host reads of a training step on 2 ranks, within a budget (issue 47, item 6): on a GPU
each read waits for the work queued before it, so the next iteration cannot overlap the
optimizer step. What a step runs that gathers or agrees across ranks is counted here with
``tests.gpu_semantics.host_reads``: Partial FC (all classes, and sampled), the cross-batch
memory's enqueue, PreemptionHook's agreement and NonFiniteLossHook's guard."""
import json
import os
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from mmengine.optim import OptimWrapper

from irtbox.engine.hooks import NonFiniteLossHook, PreemptionHook
from irtbox.models.losses import ArcFaceLoss, class_weights
from irtbox.models.losses.xbm import CrossBatchMemory
from tests.gpu_semantics import host_reads
from tests.shared_runs import forkserver

# Reads a step may make, by irtbox file: the sampled classes of this rank (two numbers that
# set the logits' shape) and the non-finite guard's one flag (read after the backward is queued).
BUDGET = {'partial_fc.py': 1, 'non_finite_loss.py': 1}
STEPS = 3


def _worker(rank, tmp):
    torch.set_num_threads(1)
    # Labels on a GPU are range-checked without a read after the first call (test_host_reads.py);
    # these CPU labels would be read at every call.
    class_weights.check_label_range = lambda *args: None
    dist.init_process_group('gloo', init_method=f'file://{tmp}/init', rank=rank, world_size=2)
    try:
        torch.manual_seed(rank)
        losses = [ArcFaceLoss(num_classes=40, embed_dim=4, partial_fc=dict(sample_rate=rate))
                  for rate in (1.0, 0.5)]
        memory = CrossBatchMemory(size=8, embed_dim=4)
        params = [p for loss in losses for p in loss.parameters()]
        wrapper = OptimWrapper(optimizer=torch.optim.SGD(params, lr=0.1))
        guard, preemption = NonFiniteLossHook(), PreemptionHook()
        runner = SimpleNamespace(optim_wrapper=wrapper, iter=0, max_iters=10)
        guard.before_train(runner)
        per_step = []
        for step in range(STEPS + 1):  # the first step agrees the seed
            x = torch.randn(3 + rank, 4, requires_grad=True)  # unequal batches: sizes differ
            labels = torch.randint(0, 40, (3 + rank, ))
            with host_reads() as reads:
                for loss in losses:
                    loss.set_sample_step(step)
                total = sum(loss(x, labels) for loss in losses)
                memory.step(x.detach(), labels)
                wrapper.update_params(total)
                guard.after_train_iter(runner, step, outputs=dict(loss=total.detach()))
                preemption.after_train_iter(runner, step)
            if step:
                per_step.append([f'{r.op} {r.where}' for r in reads])
        with open(os.path.join(tmp, f'{rank}.json'), 'w') as f:
            json.dump(per_step, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_training_step_reads_within_its_budget(tmp_path):
    # forkserver: a forked child of a process that has run a backward cannot run one (autograd's
    # threads), and which tests ran before this one in the worker depends on the scheduling.
    mp.start_processes(_worker, args=(str(tmp_path), ), nprocs=2,
                       start_method=forkserver(__name__))
    for rank in range(2):
        steps = json.loads((tmp_path / f'{rank}.json').read_text())
        assert len(steps) == STEPS
        for reads in steps:
            by_file = Counter(os.path.basename(r.split()[1].rsplit(':', 1)[0]) for r in reads)
            assert by_file == Counter(BUDGET), reads
