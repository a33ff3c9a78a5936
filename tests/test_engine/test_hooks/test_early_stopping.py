"""BestWeightsEarlyStoppingHook on scripted validation sequences: stop, best kept, reload."""
import math
import os.path as osp
from types import SimpleNamespace

import pytest
import torch

from irtbox.engine.hooks import BestWeightsEarlyStoppingHook, StoppingState, early_stopping_step
from irtbox.utils.checkpoint import safe_torch_load


def reference_stop(scores, patience, rule='greater', min_delta=0.0):
    """Independent reading of the rule: (index of the validation that stops or None, best index)."""
    best_i = None
    for i, s in enumerate(scores):
        better = (best_i is None and math.isfinite(s)) or (
            best_i is not None and math.isfinite(s) and (
                s > scores[best_i] + min_delta if rule == 'greater'
                else s < scores[best_i] - min_delta))
        if better:
            best_i = i
        last_ref = -1 if best_i is None else best_i
        if i - last_ref >= patience:
            return i, best_i
    return None, best_i


@pytest.mark.parametrize('scores,patience,rule,min_delta', [
    ([0.1, 0.3, 0.2, 0.25, 0.29, 0.5], 3, 'greater', 0.0),
    ([0.1, 0.3, 0.3, 0.3, 0.3], 3, 'greater', 0.0),            # ties are no improvement
    ([0.5, 0.4, 0.45, 0.3, 0.31, 0.29, 0.35], 2, 'less', 0.0),
    ([0.1, 0.15, 0.18, 0.3, 0.31, 0.32], 2, 'greater', 0.05),
    ([float('nan'), 0.2, float('inf'), 0.1, 0.1], 3, 'greater', 0.0),
])
def test_step_matches_reference(scores, patience, rule, min_delta):
    state, stop_at = StoppingState(), None
    for i, s in enumerate(scores):
        state, _, stop = early_stopping_step(state, s, rule, min_delta, patience)
        if stop:
            stop_at = i
            break
    ref_stop, ref_best = reference_stop(scores, patience, rule, min_delta)
    assert stop_at == ref_stop
    assert state.best == (None if ref_best is None else scores[ref_best])


class FakeRunner:
    """The parts of a Runner the hook uses; checkpoints are plain torch files."""

    def __init__(self, work_dir):
        self.model = torch.nn.Linear(3, 2)
        self.work_dir = str(work_dir)
        self.iter = self.epoch = 0
        self.train_loop = SimpleNamespace(stop_training=False)
        self.saved = []
        self.resuming_from = None

    def save_checkpoint(self, out_dir, filename, save_optimizer=True, save_param_scheduler=True,
                        by_epoch=True, meta=None):
        assert not save_optimizer and not save_param_scheduler
        ckpt = {'state_dict': self.model.state_dict(), 'meta': dict(meta or {})}
        self.hook.before_save_checkpoint(self, ckpt)
        torch.save(ckpt, osp.join(out_dir, filename))
        self.saved.append(self.iter)


def run_sequence(runner, hook, scores, interval=10):
    """Train (weights = iteration number) and validate every ``interval`` iterations."""
    runner.hook = hook
    hook.before_run(runner)
    for score in scores:
        runner.iter += interval
        with torch.no_grad():
            runner.model.weight.fill_(runner.iter)
        hook.after_val_epoch(runner, {'precision@1': score, 'map@r': 0.0})
        if runner.train_loop.stop_training:
            break


def test_stops_after_patience_and_reloads_best(tmp_path):
    scores = [0.20, 0.35, 0.30, 0.35, 0.34, 0.90]   # best at the 2nd validation, stop at the 5th
    runner, hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook(patience=3)
    run_sequence(runner, hook, scores)
    assert runner.train_loop.stop_training and runner.iter == 50
    assert hook.state.best == 0.35 and hook.best_iter == 20
    assert runner.saved == [10, 20]
    hook.after_train(runner)
    assert torch.all(runner.model.weight == 20)
    saved = safe_torch_load(osp.join(str(tmp_path), 'best.pth'))
    assert torch.all(saved['state_dict']['weight'] == 20)
    assert saved['meta']['iter'] == 20  # the iterations done (MMEngine's default: one more)
    assert saved['meta']['early_stopping'] == dict(best=0.35, wait=0, best_iter=20,
                                                   validated_iter=20)


@pytest.mark.parametrize('patience', [True, 0, 2.0])
def test_patience_must_be_a_positive_integer(patience):
    with pytest.raises(ValueError, match=r'^BestWeightsEarlyStoppingHook: patience must be a '
                       r'positive integer, got '):
        BestWeightsEarlyStoppingHook(patience=patience)


def test_no_stop_when_improving(tmp_path):
    runner = FakeRunner(tmp_path)
    hook = BestWeightsEarlyStoppingHook(patience=2, save_best=False)
    run_sequence(runner, hook, [0.1, 0.2, 0.15, 0.3, 0.25])
    assert not runner.train_loop.stop_training and runner.saved == []
    hook.after_train(runner)
    assert torch.all(runner.model.weight == 40)
    assert torch.all(hook.best_weights()['weight'] == 40)


def test_resumed_run_reloads_from_file(tmp_path):
    runner, hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook(patience=3)
    run_sequence(runner, hook, [0.5, 0.4])
    ckpt = {'meta': {}}
    hook.before_save_checkpoint(runner, ckpt)
    # A new process resumes: fresh hook, state from the checkpoint, best weights only on disk.
    resumed, new_hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook(patience=3)
    resumed.resuming_from, resumed.iter = 'iter_20.pth', 20
    new_hook.after_load_checkpoint(resumed, ckpt)
    run_sequence(resumed, new_hook, [0.45, 0.3])
    assert resumed.train_loop.stop_training and resumed.iter == 40
    new_hook.after_train(resumed)
    assert torch.all(resumed.model.weight == 10)


@pytest.mark.parametrize('scores', [[0.75, 0.375, 0.5, 0.5, 0.25], [0.2, 0.9, 0.9, 0.1, 0.1]])
def test_a_checkpoint_on_a_validation_iteration_resumes_as_if_uninterrupted(tmp_path, scores):
    """The loop writes iteration 20's checkpoint before iteration 20's validation (issue 47):
    the resumed run runs that validation first, then goes on as the uninterrupted run, to the
    same state, the same stop and the same best weights (a tie at 20 must not replace them)."""
    whole, whole_hook = FakeRunner(tmp_path / 'whole'), BestWeightsEarlyStoppingHook(patience=2)
    (tmp_path / 'whole').mkdir()
    run_sequence(whole, whole_hook, scores)

    first = FakeRunner(tmp_path / 'cut')
    (tmp_path / 'cut').mkdir()
    first_hook = BestWeightsEarlyStoppingHook(patience=2)
    run_sequence(first, first_hook, scores[:1])           # validation of iteration 10
    first.iter = 20                                       # iteration 20 trained,
    ckpt = {'meta': {}}
    first_hook.before_save_checkpoint(first, ckpt)        # its checkpoint written, then killed

    resumed, hook = FakeRunner(tmp_path / 'cut'), BestWeightsEarlyStoppingHook(patience=2)
    resumed.resuming_from, resumed.iter, resumed.hook = 'iter_20.pth', 20, hook
    with torch.no_grad():
        resumed.model.weight.fill_(20)
    resumed.train_loop = SimpleNamespace(stop_training=False, val_interval=10, val_begin=1)
    resumed.val_loop = SimpleNamespace(run=lambda: hook.after_val_epoch(
        resumed, {'precision@1': scores[1], 'map@r': 0.0}))
    hook.after_load_checkpoint(resumed, ckpt)
    hook.before_train(resumed)
    if not resumed.train_loop.stop_training:
        run_sequence(resumed, hook, scores[2:])
    assert (hook.state, hook.best_iter, resumed.iter) == (
        whole_hook.state, whole_hook.best_iter, whole.iter)
    whole_hook.after_train(whole)
    hook.after_train(resumed)
    assert torch.equal(resumed.model.weight, whole.model.weight)


def test_a_checkpoint_after_its_validation_is_not_validated_again(tmp_path):
    runner, hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook(patience=2)
    run_sequence(runner, hook, [0.5, 0.6])
    ckpt = {'meta': {}}
    hook.before_save_checkpoint(runner, ckpt)   # written after iteration 20's validation
    resumed, new_hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook(patience=2)
    resumed.resuming_from, resumed.iter = 'iter_20.pth', 20
    resumed.train_loop = SimpleNamespace(stop_training=False, val_interval=10, val_begin=1)
    resumed.val_loop = SimpleNamespace(run=lambda: pytest.fail('validated twice'))
    new_hook.after_load_checkpoint(resumed, ckpt)
    new_hook.before_train(resumed)
    assert new_hook.state == hook.state


def test_fine_tuning_does_not_inherit_state(tmp_path):
    runner, hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook()
    hook.after_load_checkpoint(runner, {'meta': {'early_stopping': dict(best=0.9, wait=2,
                                                                         best_iter=5)}})
    assert hook.state == StoppingState()


def test_missing_metric_and_bad_arguments(tmp_path):
    runner, hook = FakeRunner(tmp_path), BestWeightsEarlyStoppingHook(monitor='recall@1')
    with pytest.raises(KeyError, match="'recall@1'.*map@r"):
        hook.after_val_epoch(runner, {'precision@1': 0.1, 'map@r': 0.0})
    with pytest.raises(ValueError, match='rule'):
        BestWeightsEarlyStoppingHook(rule='max')
    with pytest.raises(ValueError, match='patience'):
        BestWeightsEarlyStoppingHook(patience=0)
