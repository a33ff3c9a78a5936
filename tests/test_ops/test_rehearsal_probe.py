"""RehearsalProbeHook's record of which hooks did their work (what the rehearsal checks)."""
import json
from types import SimpleNamespace

import torch
from mmengine.hooks import Hook

from irtbox.ops.rehearsal_probe import RehearsalProbeHook


class SetUpOnly(Hook):
    """All its work is in set-up stages (as the work dir's lock)."""

    def before_run(self, runner):
        pass

    def before_train(self, runner):
        pass


class Fitting(Hook):
    """Works in after_train_iter; before_train alone is not its work."""

    def before_train(self, runner):
        pass

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        pass


def test_set_up_only_hooks_work_when_their_stages_run_others_only_past_set_up(tmp_path):
    def run(iterate):
        probe = RehearsalProbeHook(str(tmp_path))
        hooks = [SetUpOnly(), Fitting(), probe]
        runner = SimpleNamespace(hooks=hooks, model=torch.nn.Linear(2, 2))
        probe.before_run(runner)
        for hook in hooks[:2]:
            hook.before_train(runner)
        if iterate:
            hooks[1].after_train_iter(runner, 0)
        probe.after_run(runner)
        return json.loads((tmp_path / 'run_rank0.json').read_text())['worked']
    assert run(iterate=False) == {'SetUpOnly': True, 'Fitting': False}
    assert run(iterate=True) == {'SetUpOnly': True, 'Fitting': True}
