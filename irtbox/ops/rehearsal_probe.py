"""What a rehearsal (:mod:`irtbox.ops.rehearse`) needs to know of a run, written by each rank. A
rehearsal's config registers the hook through its ``custom_imports``."""
import json
import math
import os
import os.path as osp
from collections import defaultdict

from mmengine.dist import get_rank
from mmengine.hooks import Hook

from irtbox.models.losses.partial_fc import whole_state_dict
from irtbox.registry import HOOKS
from irtbox.utils.checkpoint import state_digest
from irtbox.utils.fileio import atomic_write_text
from irtbox.engine.hooks.utils import bare_model

__all__ = ['RehearsalProbeHook']

# Stages every hook passes through whatever it does: running them says nothing of its work.
_IDLE_STAGES = ('before_run', 'after_run', 'before_train', 'after_train', 'after_load_checkpoint')
# What MMEngine's Hook calls from the train/val/test stages alike (IterTimerHook overrides
# these), and irtbox's runner before every checkpoint.
_SHARED_STAGES = ('_before_epoch', '_after_epoch', '_before_iter', '_after_iter',
                  'prepare_checkpoint')


def _plain(value):
    """A metric value as JSON can hold it (NaN and infinities as strings)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return value if math.isfinite(value) else str(value)


@HOOKS.register_module()
class RehearsalProbeHook(Hook):
    """Record, on every rank, what a rehearsal checks, into ``<out_dir>/<phase>_rank<r>.json`` at
    the end of the run (``phase``: ``IRTBOX_REHEARSAL_PHASE``):

    - ``start`` / ``end``: the iteration and the digests of the backbone's and the whole
      model's state when training starts (after any resume) and ends;
    - ``saved``: each checkpoint's iteration and digest; ``val`` / ``test``: the metrics;
    - ``val_iters``: the training iteration of each validation during training;
    - ``hooks``: each hook's own stages that ran (see ``worked``);
    - ``unfitted``: fitted projections still unfitted at the end.

    It runs last in every stage, so checkpoints are seen with what the other hooks added."""

    priority = 'LOWEST'

    def __init__(self, out_dir: str):
        self.out_dir = out_dir
        self.record = dict(saved=[], val=[], val_iters=[], test=[], hooks=defaultdict(list))
        self._own = defaultdict(set)  # the stages each hook defines

    # Every hook's own stages are wrapped so that the rehearsal sees which ran.
    def before_run(self, runner) -> None:
        for hook in runner.hooks:
            if hook is self:
                continue
            name = type(hook).__name__
            for stage in Hook.stages + _SHARED_STAGES:
                method = getattr(type(hook), stage, None)
                if method is not None and method is not getattr(Hook, stage, None):
                    setattr(hook, stage, self._recording(name, stage, getattr(hook, stage)))
                    self._own[name].add(stage)

    def _recording(self, name, stage, method):
        def recorded(*args, **kwargs):
            if stage not in self.record['hooks'][name]:
                self.record['hooks'][name].append(stage)
            return method(*args, **kwargs)
        return recorded

    def _state(self, runner) -> dict:
        model = bare_model(runner)
        backbone = getattr(model, 'backbone', None)
        # Partial FC layers hold other rows on each rank: the digest is of the whole model.
        return dict(iter=runner.iter, epoch=runner.epoch,
                    model=state_digest(whole_state_dict(model)),
                    backbone=None if backbone is None else state_digest(backbone.state_dict()))

    def before_train(self, runner) -> None:
        self.record['start'] = self._state(runner)

    def after_train(self, runner) -> None:
        self.record['end'] = self._state(runner)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        meta = checkpoint.get('meta', {})
        self.record['saved'].append(dict(iter=meta.get('iter'), epoch=meta.get('epoch'),
                                         model=state_digest(checkpoint['state_dict'])))

    def after_val_epoch(self, runner, metrics=None) -> None:
        self.record['val'].append({k: _plain(v) for k, v in (metrics or {}).items()})
        self.record['val_iters'].append(runner.iter)  # a checkpoint's meta.iter, if one fell here

    def after_test_epoch(self, runner, metrics=None) -> None:
        self.record['test'].append({k: _plain(v) for k, v in (metrics or {}).items()})

    def after_run(self, runner) -> None:
        self.record['unfitted'] = [
            name for name, module in bare_model(runner).named_modules()
            if hasattr(module, 'fitted') and not name.startswith('momentum_encoder.')
            and not bool(module.fitted)]
        # A hook whose whole job is in set-up stages (the work dir's lock) worked when they ran.
        self.record['worked'] = {
            name: any(stage not in _IDLE_STAGES for stage in stages)
            or not self._own[name] - set(_IDLE_STAGES)
            for name, stages in self.record['hooks'].items()}
        phase = os.environ.get('IRTBOX_REHEARSAL_PHASE', 'run')
        path = osp.join(self.out_dir, f'{phase}_rank{get_rank()}.json')
        os.makedirs(self.out_dir, exist_ok=True)
        atomic_write_text(path, json.dumps(self.record, indent=1, sort_keys=True))
