"""A hook that makes each training iteration last a while, so that a test can signal or kill
a run in the middle of it (imported by the runs through the config's custom_imports)."""
import time

from mmengine.hooks import Hook

from irtbox.registry import HOOKS


@HOOKS.register_module()
class SlowIterationsHook(Hook):
    """Sleep ``seconds`` after each training iteration (the weights are untouched)."""

    def __init__(self, seconds: float = 0.2):
        self.seconds = seconds

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        time.sleep(self.seconds)
