"""What a resumed training takes from its checkpoint and what from its config."""
from typing import Dict, List, Optional

from mmengine.dist import get_world_size
from mmengine.hooks import Hook

from irtbox.registry import HOOKS
from irtbox.utils.errors import IrtboxError
from irtbox.utils.mmengine_compat import wrap_train_iterator

from .utils import resume_source

__all__ = ['ResumeCheckHook', 'ResumeRefused', 'data_settings', 'training_differences',
           'training_identity']

#: Where a checkpoint's ``meta`` holds its config's identity, and what one iteration trained.
IDENTITY_KEY = 'config_identity'
DATA_KEY = 'data_settings'
_PATH_KEYS = ('data_root', 'ann_file', 'checkpoint', 'cache_dir', 'data_prefix')


def _flatten(value, prefix: str, out: Dict[str, str]) -> None:
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            if str(key) not in _PATH_KEYS:
                _flatten(value[key], f'{prefix}.{key}', out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _flatten(item, f'{prefix}.{i}', out)
        if not value:
            out[prefix] = '[]'
    elif isinstance(value, type) or callable(value):
        out[prefix] = getattr(value, '__name__', repr(value))
    else:
        out[prefix] = repr(value)


def training_identity(cfg) -> Dict[str, str]:
    """What makes two trainings the same: every entry of the config's ``model`` and the
    training set's ``type`` and ``split``, flattened to ``{'model.backbone.depth': '1', ...}``.
    Paths are left out (data and weights move between machines); so are the schedule, the
    optimizer and the loader: a longer schedule or another learning rate continues a run."""
    out: Dict[str, str] = {}
    _flatten(cfg.get('model') or {}, 'model', out)
    dataset = (cfg.get('train_dataloader') or {}).get('dataset') or {}
    if isinstance(dataset, dict):
        for key in ('type', 'split'):
            if key in dataset:
                _flatten(dataset[key], f'train_dataloader.dataset.{key}', out)
    return out


def training_differences(saved: Optional[dict], now: Dict[str, str], limit: int = 3) -> List[str]:
    """Up to ``limit`` lines ``key: A in the checkpoint, B in this config``; empty when the
    same or ``saved`` is None."""
    if not isinstance(saved, dict):
        return []
    lines = [f'{key}: {saved.get(key, "(none)")} in the checkpoint, {now.get(key, "(none)")} '
             'in this config' for key in sorted(set(saved) | set(now))
             if saved.get(key) != now.get(key)]
    if len(lines) > limit:
        lines = lines[:limit] + [f'... and {len(lines) - limit} more']
    return lines


def data_settings(cfg) -> Dict[str, Optional[int]]:
    """What one iteration trains: the batch size of each process, the sampler's images per
    class (``m``) and the number of processes."""
    loader = cfg.get('train_dataloader') or {}
    sampler = loader.get('sampler') or {}
    return {'train_dataloader.batch_size': loader.get('batch_size'),
            'train_dataloader.sampler.m': sampler.get('m') if isinstance(sampler, dict) else None,
            'processes': get_world_size()}


class _SkipTrained:
    """A train loop's batch iterator whose first ``advance`` batches (MMEngine's skip over
    the iterations trained, at the old size) take ``skip`` batches of the new size instead."""

    def __init__(self, iterator, advance: int, skip: int):
        self._iterator, self._advance, self._skip = iterator, advance, skip

    def __iter__(self):
        return self

    def __next__(self):
        if self._advance == 0:
            return next(self._iterator)
        self._advance -= 1
        if self._advance == 0:  # MMEngine discards what the advance returns
            for _ in range(self._skip):
                next(self._iterator)
        return None

    def __getattr__(self, name):  # _dataloader, ... of MMEngine's iterator
        return getattr(self._iterator, name)


# Param group entries that are no training setting: the parameters, the learning rate
# (scaled on its own), schedulers' bases, and how torch runs the update.
_NOT_SETTINGS = ('params', 'lr', 'foreach', 'capturable', 'differentiable', 'fused')


def _samples_per_iter(settings: dict) -> Optional[int]:
    batch, processes = settings.get('train_dataloader.batch_size'), settings.get('processes')
    return batch * processes if isinstance(batch, int) and isinstance(processes, int) else None


class ResumeRefused(IrtboxError, RuntimeError):
    """A checkpoint whose training state cannot continue under this config; ``problem``: what
    does not fit; ``other_training``: it was written by another training."""

    def __init__(self, checkpoint: str, problem: str, other_training: bool = False):
        self.checkpoint, self.problem, self.other_training = checkpoint, problem, other_training
        where = ('train in another work_dir, or set resume=False to start over in this one '
                 '(its checkpoints of the same name are overwritten); ' if other_training else '')
        super().__init__(f'resume from {checkpoint}: {problem}. To go on: {where}to start from '
                         f'its weights, load_from={checkpoint} with resume=False (loads the '
                         'weights only).')


def _group_settings(group: dict) -> dict:
    """A param group's training settings (weight decay, momentum, betas, eps, ...)."""
    return {key: value for key, value in group.items()
            if key not in _NOT_SETTINGS and not key.startswith('initial_')}


def _plain(value):
    """``value`` with tuples as lists (a checkpoint may hold either)."""
    return list(map(_plain, value)) if isinstance(value, (list, tuple)) else value


def _lr_scheduler_states(checkpoint: dict) -> List[dict]:
    """The saved states of the checkpoint's learning-rate schedulers."""
    saved = checkpoint.get('param_schedulers') or []
    groups = saved.values() if isinstance(saved, dict) else [saved]
    return [s for group in groups for s in (group if isinstance(group, (list, tuple)) else [])
            if isinstance(s, dict) and s.get('param_name') == 'lr']


@HOOKS.register_module()
class ResumeCheckHook(Hook):
    """Resumes only the training that wrote a checkpoint, with the config's optimizer settings.

    - Every checkpoint records its training's identity (:func:`training_identity`) and its
      optimizer type; resuming another training's or another optimizer type's is refused
      (:class:`ResumeRefused`) naming what differs, before any state is loaded.
    - Another learning rate in the config: training goes on at the config's (each group's
      rate and its schedule scaled by new / old), with a warning; so do other settings.
      A change the resumed state cannot follow (a scheduled momentum, AMSGrad switched on,
      another number of param groups) is refused.
    - Another batch size, sampler ``m`` or number of processes (:func:`data_settings`): training
      goes on with the config's, said in one warning, and the iteration-based loop skips the
      *samples* trained (iterations x batch size x processes, in batches of the new size,
      rounded up) rather than as many batches as iterations. The schedule stays in iterations.

    It edits the checkpoint as it is loaded, while the runner's optimizer and schedulers
    still hold the config's values, and only when the runner resumes."""

    priority = 'HIGHEST'  # refuse before any other hook acts on the checkpoint

    def __init__(self) -> None:
        self._resumed: Optional[tuple] = None  # (checkpoint, its data settings)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        meta = checkpoint.setdefault('meta', {})
        optimizer = getattr(getattr(runner, 'optim_wrapper', None), 'optimizer', None)
        if optimizer is not None:
            meta.setdefault('optimizer_type', type(optimizer).__name__)
        meta.setdefault(IDENTITY_KEY, training_identity(runner.cfg))
        meta.setdefault(DATA_KEY, data_settings(runner.cfg))

    def before_train(self, runner) -> None:
        """A resumed run whose iteration means other samples: say so, and skip the samples
        trained (the loop's own skip counts iterations, in batches of the new size)."""
        if self._resumed is None:
            return
        (filename, saved), iters = self._resumed, runner.iter  # the loop's skip counts these
        self._resumed = None
        now = data_settings(runner.cfg)
        changed = [key for key in now if saved.get(key) is not None and now[key] is not None
                   and saved[key] != now[key]]
        if not changed or not iters:
            return
        said = ', '.join(f'{key} {now[key]} (checkpoint: {saved[key]})' for key in changed)
        before, after = (_samples_per_iter(settings) for settings in (saved, now))
        skip, batches = '', -(-iters * before // after) if before and after else iters
        if batches != iters and hasattr(runner.train_loop, 'dataloader_iterator'):
            wrap_train_iterator(runner.train_loop, _SkipTrained, iters, batches)
            skip = (f'; the {iters} iterations trained {iters * before} samples, so the data '
                    f'resumes after {batches} batches of the new size, not {iters}')
        runner.logger.warning(f'resume: the config changes what an iteration trains in '
                              f'{filename}: training goes on with the config\'s {said}{skip}. '
                              'The schedule stays in iterations.')

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        filename = resume_source(runner)
        if filename is None:
            return
        meta = checkpoint.get('meta') or {}
        if isinstance(meta.get(DATA_KEY), dict):
            self._resumed = (filename, meta[DATA_KEY])
        differences = training_differences((checkpoint.get('meta') or {}).get(IDENTITY_KEY),
                                           training_identity(runner.cfg))
        if differences:
            raise ResumeRefused(filename, f'it was written by another training '
                                f'({"; ".join(differences)}); it is not resumed',
                                other_training=True)
        optimizer = getattr(getattr(runner, 'optim_wrapper', None), 'optimizer', None)
        saved = checkpoint.get('optimizer')
        if optimizer is None or not isinstance(saved, dict) or 'param_groups' not in saved:
            return
        before = (checkpoint.get('meta') or {}).get('optimizer_type')
        now = type(optimizer).__name__
        if before is not None and before != now:
            raise ResumeRefused(filename, f'its optimizer is {before}, the config asks for {now}; '
                                f"{before}'s state cannot continue as {now}'s")
        groups = saved['param_groups']
        if len(groups) != len(optimizer.param_groups):
            raise ResumeRefused(
                filename, f'it holds {len(groups)} optimizer param groups, the config builds '
                f'{len(optimizer.param_groups)} (optim_wrapper.paramwise_cfg changed?); the '
                'optimizer state cannot be matched to the parameters')
        self._use_config_lr(runner, optimizer.param_groups, checkpoint, filename)
        self._use_config_settings(runner, optimizer.param_groups, groups, filename)

    @staticmethod
    def _use_config_lr(runner, fresh_groups, checkpoint: dict, filename: str) -> None:
        """Where the config's base learning rates differ from the checkpoint's, scale each
        saved group's rate, its ``initial_lr`` and the saved schedulers' values by new / old."""
        groups = checkpoint['optimizer']['param_groups']
        fresh = [group.get('initial_lr', group['lr']) for group in fresh_groups]
        old = [group.get('initial_lr', group['lr']) for group in groups]
        if all(abs(n - o) <= 1e-12 * max(abs(n), abs(o)) for n, o in zip(fresh, old)):
            return
        schedulers = _lr_scheduler_states(checkpoint)
        for i, (group, new_lr, old_lr) in enumerate(zip(groups, fresh, old)):
            ratio = new_lr / old_lr if old_lr else None
            group['lr'] = group['lr'] * ratio if ratio is not None else new_lr
            if 'initial_lr' in group:
                group['initial_lr'] = new_lr
            for scheduler in schedulers:
                for name in ('base_values', '_last_value'):
                    values = scheduler.get(name)
                    if isinstance(values, list) and i < len(values):
                        values[i] = values[i] * ratio if ratio is not None else new_lr
        runner.logger.warning(
            f'resume: the learning rate is {fresh[0]:g} in the config, {old[0]:g} in '
            f'{filename}: training goes on at the config\'s {fresh[0]:g} (each param group\'s '
            'rate and its schedule scaled by new / old). To keep the checkpoint\'s, set '
            f'optim_wrapper.optimizer.lr={old[0]:g}.')

    @staticmethod
    def _use_config_settings(runner, fresh_groups, groups: List[dict], filename: str) -> None:
        """Put the config's settings into the saved param ``groups`` where they differ, with
        one warning naming each; refuse a change the resumed state cannot follow."""
        changed = {}
        for group, wanted in zip(groups, map(_group_settings, fresh_groups)):
            for key, value in wanted.items():
                if key in group and _plain(group[key]) != _plain(value):
                    changed.setdefault(key, (value, group[key]))
        # MMEngine's momentum schedulers keep the base under initial_momentum (also for betas)
        scheduled = sorted(k for k in changed if any(
            f'initial_{k}' in g or (k == 'betas' and 'initial_momentum' in g) for g in groups))
        if changed.get('amsgrad', (False, False))[0] and not changed['amsgrad'][1]:
            scheduled.append('amsgrad')  # its running maximum is not in the state
        if scheduled:
            key = scheduled[0]
            raise ResumeRefused(
                filename, f'the config changes optim_wrapper.optimizer.{key} '
                f'({changed[key][1]!r} in the checkpoint, {changed[key][0]!r} in the config), '
                'which the resumed optimizer state or its schedule cannot follow; set it back')
        if not changed:
            return
        for group, wanted in zip(groups, map(_group_settings, fresh_groups)):
            group.update({k: v for k, v in wanted.items() if k in changed})
        said = ', '.join(f'{key} {_plain(new)!r} (checkpoint: {_plain(old)!r})'
                         for key, (new, old) in sorted(changed.items()))
        runner.logger.warning(
            f'resume: the config changes optimizer settings of {filename}: training goes on '
            f'with the config\'s {said}. To keep the checkpoint\'s, set them back in '
            'optim_wrapper.optimizer.')
