"""Gradient noise of one loss during training (IRT Fig. 4)."""
import json
import math
import os.path as osp

import torch
from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log

from irtbox.evaluation.functional.gradient_noise import gradient_direction_spread
from irtbox.utils.checks import check_int
from irtbox.utils.dist import all_gather_cat
from irtbox.utils.fileio import atomic_write_text
from irtbox.registry import HOOKS
from .utils import bare_model

__all__ = ['GradientNoiseHook']


@HOOKS.register_module()
class GradientNoiseHook(Hook):
    """Measures γ = ||Cov(∇_z L)||_* of one head loss in the training steps (IRT Fig. 4).

    Every ``interval`` iterations, a forward hook on ``model.head.losses[loss_name]`` takes
    the gradient of that loss's unweighted output with respect to its B x D embeddings z, in
    the step's own graph (``retain_graph=True``): parameters' ``.grad`` and the loss's memory
    are left as they are, so training is the same with and without the hook. Under DDP the
    gradients of all ranks are gathered (γ of the whole batch). γ
    (:func:`~irtbox.evaluation.functional.gradient_direction_spread`) is logged as
    ``train/gradient_gamma`` and averaged (in the message hub, so across a resume);
    iterations with fewer than 2 non-zero gradient rows have none and are counted apart.
    After training, rank 0 writes ``<work_dir>/gradient_noise.json`` (``loss``,
    ``gamma_mean``, ``num_iterations``, ``num_undefined``, ``interval``).

    Args:
        loss_name (str): key of the loss in ``model.head.losses``; its weight
            must not be 0 (a weight-0 loss is never computed).
        interval (int): measure every ``interval`` training iterations.
    """

    priority = 'NORMAL'  # before the LoggerHook (BELOW_NORMAL) reads the message hub
    STATE_KEY = 'gradient_noise'

    def __init__(self, loss_name: str = 'contrastive', interval: int = 1):
        if not isinstance(loss_name, str) or not loss_name:
            raise ValueError(f'GradientNoiseHook: loss_name must be a non-empty str, '
                             f'got {loss_name!r}')
        check_int(interval, 'GradientNoiseHook: interval')
        self.loss_name = loss_name
        self.interval = interval
        self._handle = None
        self._armed = False
        self._grads = []

    def _loss_module(self, runner) -> torch.nn.Module:
        model = bare_model(runner)
        head = getattr(model, 'head', None)
        losses = getattr(head, 'losses', None)
        if not isinstance(losses, torch.nn.ModuleDict):
            raise TypeError('GradientNoiseHook: the model needs a head with named losses '
                            f'(model.head.losses, e.g. EmbeddingHead); {type(model).__name__} '
                            f'has head {type(head).__name__}')
        if self.loss_name not in losses:
            raise KeyError(f'GradientNoiseHook: loss_name={self.loss_name!r} is not a loss of '
                           f'model.head; its losses are {sorted(losses)}')
        if head.loss_weights.get(self.loss_name) == 0:
            raise ValueError(f'GradientNoiseHook: model.head.loss_weights.{self.loss_name} is 0, '
                             'so the loss is never computed and has no gradient to measure')
        return losses[self.loss_name]

    def before_train(self, runner) -> None:
        self._remove_forward_hook()
        self._handle = self._loss_module(runner).register_forward_hook(self._capture)
        hub = runner.message_hub
        # A fresh run starts from zero; a resumed one keeps the state loaded from its checkpoint.
        if runner.iter == 0 or hub.get_info(self.STATE_KEY) is None:
            hub.update_info(self.STATE_KEY, dict(sum=0.0, count=0, undefined=0), resumed=True)

    def _capture(self, module, args, output) -> None:
        if not (self._armed and torch.is_grad_enabled() and args
                and isinstance(args[0], torch.Tensor) and args[0].requires_grad):
            return
        grad, = torch.autograd.grad(output, args[0], retain_graph=True)
        self._grads.append(grad.detach())

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self._armed = self.every_n_train_iters(runner, self.interval)
        self._grads = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if not self._armed:
            return
        self._armed = False
        if not self._grads:
            raise RuntimeError(f'GradientNoiseHook: the loss {self.loss_name!r} was not computed '
                               'on embeddings that require grad in training iteration '
                               f'{runner.iter + 1}; nothing to measure')
        # A loss called several times in one step: each call's rows are other samples.
        grads, = all_gather_cat(torch.cat(self._grads))
        self._grads = []
        gamma = gradient_direction_spread(grads)
        state = dict(runner.message_hub.get_info(self.STATE_KEY))
        if math.isnan(gamma):
            state['undefined'] += 1
        else:
            state['sum'] += gamma
            state['count'] += 1
            runner.message_hub.update_scalar('train/gradient_gamma', gamma)
        runner.message_hub.update_info(self.STATE_KEY, state, resumed=True)

    def after_train(self, runner) -> None:
        self._remove_forward_hook()
        if not is_main_process():
            return
        state = runner.message_hub.get_info(self.STATE_KEY)
        result = dict(loss=self.loss_name,
                      gamma_mean=state['sum'] / state['count'] if state['count'] else None,
                      num_iterations=state['count'], num_undefined=state['undefined'],
                      interval=self.interval)
        path = osp.join(runner.work_dir, 'gradient_noise.json')
        atomic_write_text(path, json.dumps(result, indent=2))
        print_log(f'GradientNoiseHook: mean gamma of {self.loss_name!r} over '
                  f'{state["count"]} iterations = {result["gamma_mean"]} -> {path}',
                  logger='current')

    def _remove_forward_hook(self) -> None:
        """Remove the forward hook from the loss (no-op when none is registered)."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._armed = False
