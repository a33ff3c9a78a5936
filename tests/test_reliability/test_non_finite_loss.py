"""A non-finite loss stops training with a non-zero exit naming the iteration and the loss
terms; the last finite checkpoint stays the latest."""
import math
import os
import os.path as osp

import pytest
import torch

from irtbox.engine import NonFiniteLossHook
from irtbox.utils.checkpoint import safe_torch_load
from irtbox.cli import train as train_tool
from tests.test_reliability.reliability_helpers import TINY_CONFIG, run_log

# The reproduction: lr=1e6 turns the loss of iteration 2 into NaN on the SOP fixture.
DIVERGING = ['optim_wrapper.optimizer.lr=1e6', 'train_cfg.max_iters=6',
             'default_hooks.checkpoint.interval=1']


def train(work_dir, *options):
    """The exit status of the training command (what tools/train.py exits with)."""
    with pytest.raises(SystemExit) as stop:
        train_tool.main([TINY_CONFIG, '--work-dir', str(work_dir), '--cfg-options', *DIVERGING,
                         *options])
    return stop.value.code


@pytest.mark.slow
def test_nan_loss_stops_with_non_zero_exit(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    # Before: trained to the end, exit 0, iter_6.pth all NaN.
    assert train(work_dir) == 1
    log = run_log(str(work_dir))
    assert 'iteration 2: non-finite loss (loss=nan, loss_contrastive=nan' in log
    assert f'The latest checkpoint stays {work_dir}/iter_1.pth' in log
    assert sorted(n for n in os.listdir(work_dir) if n.endswith('.pth')) == ['iter_1.pth']
    with open(work_dir / 'last_checkpoint') as f:
        assert f.read().strip() == str(work_dir / 'iter_1.pth')
    state = safe_torch_load(str(work_dir / 'iter_1.pth'))['state_dict']
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


@pytest.mark.slow
def test_allowed_skips_then_stop(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    assert train(work_dir, 'default_hooks.non_finite_loss.max_skipped=2') == 1
    log = run_log(str(work_dir))
    assert 'iteration 2: non-finite loss' in log and 'update skipped (1 of at most 2)' in log
    assert 'update skipped (2 of at most 2)' in log
    assert 'training stopped (3 non-finite iteration(s)' in log
    # The skipped updates never reached the weights: every checkpoint saved is finite.
    for name in os.listdir(work_dir):
        if name.endswith('.pth'):
            state = safe_torch_load(osp.join(work_dir, name))['state_dict']
            assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


def test_hook_counts_non_finite_terms_only():
    hook = NonFiniteLossHook(max_skipped=1)

    class Runner:
        iter, work_dir = 6, '/nonexistent'
        logger = type('L', (), {'warning': staticmethod(lambda message: None)})

    hook.after_train_iter(Runner, 0, outputs=dict(loss=torch.tensor(1.0)))
    assert hook.skipped == 0
    hook.after_train_iter(Runner, 0, outputs=dict(loss=torch.tensor(math.inf), loss_a=1.0))
    assert hook.skipped == 1
    with pytest.raises(RuntimeError, match=r'iteration 7: non-finite loss \(loss_b=nan\)'):
        hook.after_train_iter(Runner, 0, outputs=dict(loss_b=torch.tensor(math.nan)))
