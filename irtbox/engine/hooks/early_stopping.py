"""Early stopping on a validation metric, keeping and reloading the best weights (Berton, Musgrave &
Masone's recipe, ``docs/methods/dml_benchmark.md``). MMEngine's ``EarlyStoppingHook`` does not keep
or reload weights, counts a tie as an improvement and only warns when the monitored key is missing;
hence this hook."""
import copy
import math
import os.path as osp
from typing import Dict, NamedTuple, Optional

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop

from irtbox.registry import HOOKS
from irtbox.utils.checkpoint import safe_torch_load
from irtbox.utils.checks import check_int
from irtbox.utils.errors import ArgumentError
from .utils import bare_model, resume_source

__all__ = ['StoppingState', 'early_stopping_step', 'BestWeightsEarlyStoppingHook']


class StoppingState(NamedTuple):
    """``best``: best score so far (None before the first); ``wait``: validations since it."""
    best: Optional[float] = None
    wait: int = 0


def early_stopping_step(state: StoppingState, score: float, rule: str = 'greater',
                        min_delta: float = 0.0, patience: int = 3):
    """One validation of early stopping: ``score`` improves when better by more than
    ``min_delta`` (a tie is no improvement, so the earliest best weights are kept; a
    non-finite score never improves).

    Returns:
        (new_state, improved, stop): ``stop`` once ``patience`` validations brought none.
    """
    if rule not in ('greater', 'less'):
        raise ArgumentError(f"rule must be 'greater' or 'less', got {rule!r}", 'rule')
    finite = math.isfinite(score)
    if state.best is None:
        improved = finite
    elif rule == 'greater':
        improved = finite and score > state.best + min_delta
    else:
        improved = finite and score < state.best - min_delta
    if improved:
        return StoppingState(float(score), 0), True, False
    wait = state.wait + 1
    return StoppingState(state.best, wait), False, wait >= patience


@HOOKS.register_module()
class BestWeightsEarlyStoppingHook(Hook):
    """Stops training when ``monitor`` stops improving; reloads the best weights at the end. On an
    improvement the model's weights are copied (on the CPU) and, with ``save_best``, written as
    ``<work_dir>/<best_filename>`` (without optimizer state). At ``after_train`` (before any
    ``runner.test()``) the best weights are loaded back, from memory or, after a resumed run, from
    that file. With ``IterBasedTrainLoop(val_interval=N)`` a validation is an "epoch" of N
    iterations.

    A checkpoint taken at a validation's iteration (or epoch) is written before that validation
    runs, so it holds the state from before it; a run resumed from it runs that validation
    again first (``before_train``), as the uninterrupted run did, so both go on from the same
    state and the same best weights.

    Args:
        monitor: validation metric name (with the evaluator's ``prefix/`` if it has one).
        rule: ``'greater'`` (higher is better) or ``'less'``.
        patience: validations without improvement before stopping.
        reload_best: load the best weights into the model at the end of training.
    """

    # Last, so the other hooks' after_train (e.g. checkpoint publishing) see the
    # trained weights, not the reloaded ones.
    priority = 'LOWEST'

    def __init__(self, monitor: str = 'precision@1', rule: str = 'greater', patience: int = 3,
                 min_delta: float = 0.0, save_best: bool = True,
                 best_filename: str = 'best.pth', reload_best: bool = True):
        if rule not in ('greater', 'less'):
            raise ValueError(f"{type(self).__name__}: rule must be 'greater' or 'less', "
                             f'got {rule!r}')
        if min_delta < 0:
            raise ValueError(f'{type(self).__name__}: min_delta must be >= 0, got {min_delta}')
        self.monitor = monitor
        self.rule = rule
        self.patience = check_int(patience, f'{type(self).__name__}: patience')
        self.min_delta = float(min_delta)
        self.save_best = save_best
        self.best_filename = best_filename
        self.reload_best = reload_best
        self.state = StoppingState()
        self.best_iter: Optional[int] = None
        self.validated_iter: Optional[int] = None  # the iteration of the last validation counted
        self._resumed = False
        self._best_weights: Optional[Dict[str, torch.Tensor]] = None

    def before_run(self, runner) -> None:
        if runner.train_loop is not None and not hasattr(runner.train_loop, 'stop_training'):
            raise TypeError(f'{type(self).__name__}: the train loop '
                            f'{type(runner.train_loop).__name__} has no stop_training flag')

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        metrics = metrics or {}
        if self.monitor not in metrics:
            raise KeyError(f'{type(self).__name__}: monitored metric {self.monitor!r} is not '
                           f'among the validation metrics {sorted(metrics)}; set monitor= to '
                           'one of them.')
        score = float(metrics[self.monitor])
        self.validated_iter = runner.iter
        self.state, improved, stop = early_stopping_step(
            self.state, score, self.rule, self.min_delta, self.patience)
        if improved:
            self.best_iter = runner.iter
            self._best_weights = {k: v.detach().to('cpu', copy=True)
                                  for k, v in bare_model(runner).state_dict().items()}
            if self.save_best:
                runner.save_checkpoint(runner.work_dir, self.best_filename,
                                       save_optimizer=False, save_param_scheduler=False,
                                       by_epoch=False,  # the iterations done, not one more:
                                       meta=dict(epoch=runner.epoch, iter=runner.iter))
        if stop:
            runner.train_loop.stop_training = True
            print_log(f'early stopping at iteration {runner.iter}: {self.monitor} has not '
                      f'improved for {self.state.wait} validations (best {self.state.best:.4f} '
                      f'at iteration {self.best_iter})', logger='current')

    def before_train(self, runner) -> None:
        if self._resumed and _validates_now(runner) and (
                self.validated_iter is None or self.validated_iter < runner.iter):
            print_log(f'{type(self).__name__}: the checkpoint of iteration {runner.iter} was '
                      'written before that iteration\'s validation; running it now',
                      logger='current')
            runner.val_loop.run()

    def after_train(self, runner) -> None:
        if not self.reload_best or self.state.best is None:
            return
        weights = self._best_weights
        if weights is None:
            # A resumed run: the best weights of the earlier part are in the file.
            path = osp.join(runner.work_dir, self.best_filename)
            if not osp.isfile(path):
                raise FileNotFoundError(
                    f'{type(self).__name__}: the best weights (iteration {self.best_iter}) are '
                    f'not in memory and {path} does not exist (save_best=False with a resumed run?)')
            weights = safe_torch_load(path)['state_dict']
        bare_model(runner).load_state_dict(weights)
        print_log(f'reloaded the best weights ({self.monitor}={self.state.best:.4f}, '
                  f'iteration {self.best_iter})', logger='current')

    # The stopping state travels in checkpoints, so a resumed run continues it.
    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint.setdefault('meta', {})['early_stopping'] = dict(
            best=self.state.best, wait=self.state.wait, best_iter=self.best_iter,
            validated_iter=self.validated_iter)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        saved = checkpoint.get('meta', {}).get('early_stopping')
        # Only a resumed run continues; fine-tuning from a checkpoint starts afresh.
        if saved is not None and resume_source(runner) is not None:
            self.state = StoppingState(saved['best'], saved['wait'])
            self.best_iter = saved['best_iter']
            self.validated_iter = saved.get('validated_iter')
            self._resumed = True
            self._best_weights = None

    def best_weights(self) -> Optional[Dict[str, torch.Tensor]]:
        """A copy of the best weights kept in memory (None before the first validation)."""
        return copy.deepcopy(self._best_weights)


def _validates_now(runner) -> bool:
    """Whether the train loop validates at the point it resumes from (MMEngine's rule: from
    ``val_begin``, every ``val_interval`` iterations, or epochs for an epoch-based loop)."""
    loop = runner.train_loop
    interval, begin = getattr(loop, 'val_interval', None), getattr(loop, 'val_begin', 1)
    if runner.val_loop is None or not interval:
        return False
    done = runner.epoch if isinstance(loop, EpochBasedTrainLoop) else runner.iter
    return done >= begin and done % interval == 0
