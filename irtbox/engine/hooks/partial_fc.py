"""Checkpoints of sharded class-centre layers (Partial FC) that hold the whole matrix."""
from typing import Dict, List, Optional, Tuple

import torch
from mmengine.hooks import Hook
from mmengine.optim import OptimWrapper

from irtbox.models.losses.partial_fc import gather_rows, shard_sizes, sharded_layers
from irtbox.registry import HOOKS

from .utils import bare_model

__all__ = ['PartialFCHook', 'keep_out_of_ddp', 'sharded_parameter_names']


def _optimizer_of(runner) -> Optional[torch.optim.Optimizer]:
    wrapper = getattr(runner, 'optim_wrapper', None)
    return wrapper.optimizer if isinstance(wrapper, OptimWrapper) else None


def _state_index(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> Optional[int]:
    """The key of ``param`` in ``optimizer.state_dict()['state']``: its position among the
    parameters of all groups, in order (as ``Optimizer.state_dict`` numbers them)."""
    params = (p for group in optimizer.param_groups for p in group['params'])
    return next((index for index, p in enumerate(params) if p is param), None)


@HOOKS.register_module()
class PartialFCHook(Hook):
    """Makes a checkpoint hold the whole C x D matrix of every sharded class-centre layer
    (:mod:`irtbox.models.losses.partial_fc`) and its whole optimizer state, whatever the
    number of ranks that wrote it, and cuts each rank's rows out on loading: a run resumes on
    any number of processes, and evaluation reads the checkpoint as the replicated layer's.

    - ``prepare_checkpoint`` (every rank): rank 0 receives every rank's rows of the centres
      and of each optimizer state tensor of their shape, one rank at a time, onto the CPU.
    - ``before_save_checkpoint`` (rank 0): puts them in place of rank 0's rows.
    - ``after_load_checkpoint`` (every rank): replaces the whole matrices by this rank's rows.
    - ``before_train_iter``: tells each layer the iteration, which seeds its sampling."""

    priority = 'VERY_HIGH'

    def __init__(self) -> None:
        self._gathered: Dict[str, torch.Tensor] = {}
        self._gathered_state: Dict[Tuple[int, str], torch.Tensor] = {}

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        for _, layer in sharded_layers(bare_model(runner)):
            layer.set_sample_step(runner.iter)

    def prepare_checkpoint(self, runner) -> None:
        self._gathered, self._gathered_state = {}, {}
        optimizer = _optimizer_of(runner)
        for name, layer in sharded_layers(bare_model(runner)):
            param = layer.class_weights
            sizes = shard_sizes(layer.num_classes, layer.world_size)
            full = gather_rows(param, sizes)
            if full is not None:
                self._gathered[f'{name}.class_weights'] = full
            index = None if optimizer is None else _state_index(optimizer, param)
            state = optimizer.state.get(param, {}) if index is not None else {}
            for key in sorted(state):
                value = state[key]
                if isinstance(value, torch.Tensor) and value.shape == param.shape:
                    full = gather_rows(value, sizes)
                    if full is not None:
                        self._gathered_state[(index, key)] = full

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        try:
            weights = checkpoint.get('state_dict', {})
            for key, full in self._gathered.items():
                if key in weights:
                    weights[key] = full
            states = (checkpoint.get('optimizer') or {}).get('state', {})
            for (index, key), full in self._gathered_state.items():
                if key in states.get(index, {}):
                    states[index][key] = full
        finally:  # the whole matrices are held for this one checkpoint only
            self._gathered, self._gathered_state = {}, {}

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        weights = checkpoint.get('state_dict', checkpoint)
        optimizer = _optimizer_of(runner)
        states = (checkpoint.get('optimizer') or {}).get('state', {})
        for name, layer in sharded_layers(bare_model(runner)):
            rows = slice(layer.shard_start, layer.shard_start + len(layer.class_weights))
            for key in (f'{name}.class_weights', f'module.{name}.class_weights'):
                if key in weights:
                    weights[key] = _own_rows(weights[key], layer.num_classes, rows)
            index = None if optimizer is None else _state_index(optimizer, layer.class_weights)
            for key, value in list(states.get(index, {}).items()):
                states[index][key] = _own_rows(value, layer.num_classes, rows)


def _own_rows(value, num_classes: int, rows: slice):
    """This rank's ``rows`` of a whole C x ... matrix; anything else as it is."""
    if isinstance(value, torch.Tensor) and value.ndim >= 1 and len(value) == num_classes \
            and rows.stop - rows.start != num_classes:
        return value[rows].clone()
    return value


def sharded_parameter_names(model: torch.nn.Module) -> List[str]:
    """Qualified names of the sharded centres in ``model`` (for DDP to ignore)."""
    return [f'{name}.class_weights' for name, _ in sharded_layers(model)]


def keep_out_of_ddp(model: torch.nn.Module) -> None:
    """Have DDP leave the sharded centres of ``model`` alone (each rank updates its own rows;
    nothing of their size is all-reduced): DDP's ``_ddp_params_and_buffers_to_ignore``."""
    names = sharded_parameter_names(model)
    if names:
        from torch.nn.parallel import DistributedDataParallel
        names = set(names) | set(getattr(model, '_ddp_params_and_buffers_to_ignore', ()))
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, sorted(names))
