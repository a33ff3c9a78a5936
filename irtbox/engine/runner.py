"""``IrtboxRunner``: MMEngine's ``Runner`` with checkpoints that cannot silently lose work.

- Saving is atomic (:func:`~irtbox.utils.fileio.atomic_write`): a checkpoint is written to
  a temporary file in the same directory, fsynced, then renamed to its name (the directory
  fsynced too), so a kill while saving never leaves a truncated file under a checkpoint's
  name.
- Resuming (``resume=True`` without ``load_from``: ``irtbox train``'s default) continues from
  the newest *intact* checkpoint of the work dir (``last_checkpoint``'s target or the
  ``iter_*``/``epoch_*`` files), warning about every file it skips; with none it says so
  and starts from iteration 0.
- Loading (``load_from``, ``tools/test.py CKPT``, ``--resume``) refuses a checkpoint whose
  keys or shapes differ from the model (:func:`irtbox.utils.checkpoint.load_model_weights`)
  unless the config sets ``load_partial = True``.
- A run starting from iteration 0 in a work dir that holds checkpoints says which it may
  overwrite.
- One training at a time in a work dir: rank 0 holds ``WORK_DIR/.irtbox.lock`` while training
  (:class:`~irtbox.engine.work_dir_lock.WorkDirLock`); a second training is refused naming
  the first's PID, host and start time; a lock left by a dead process is taken over.
- Resuming with another learning rate or other optimizer settings (weight decay, momentum,
  betas, eps) in the config than in the checkpoint trains with the config's (a warning
  names each; the schedule is scaled along with the rate); a change the resumed state
  cannot follow, or a checkpoint of another optimizer type, is refused
  (:class:`ResumeRefused`).
- Resuming a checkpoint of another training (another model, losses or training set:
  :mod:`~irtbox.engine.run_identity`, recorded in every checkpoint's ``meta``) is refused
  (:class:`ResumeRefused`) naming what differs.
- Checkpoints rotate through irtbox's :class:`~irtbox.engine.hooks.CheckpointHook`: a file is
  deleted only once its successor is written and ``last_checkpoint`` names it.
- The ``preemption`` default hook (:class:`~irtbox.engine.hooks.PreemptionHook`) saves a
  checkpoint and stops on SIGTERM / SIGUSR1, and carries the ranks' generator states in
  every checkpoint.
- Checkpoints are prepared on every rank: a hook with a ``prepare_checkpoint(runner)``
  method (e.g. the PCA / whitening fits, which run collectives) is called on all ranks
  before rank 0 writes the file, so a DDP run never waits on rank 0 alone.
- A model with Partial FC layers (``partial_fc=`` on a classification loss): their sharded
  class centres are kept out of DDP and out of the initial broadcast of the weights, and
  :class:`~.hooks.partial_fc.PartialFCHook` (registered with the default hooks) makes
  checkpoints hold them whole.
- A checkpoint written after validation (``best_*.pth``) records the iterations (epochs)
  done, not one more.
- The ``non_finite_loss`` default hook (:class:`~irtbox.engine.hooks.NonFiniteLossHook`)
  stops training at the first non-finite loss; ``sync_norm_stats``
  (:class:`~irtbox.engine.hooks.SyncNormStatsHook`) keeps BatchNorm statistics equal on
  every rank.

The tools build it with ``IrtboxRunner.from_cfg(cfg)``; a config may also name it with
``runner_type = 'IrtboxRunner'``.
"""
import logging
import os
import os.path as osp
import re
from typing import List, Optional, Tuple

import torch
from mmengine.dist import broadcast, broadcast_object_list, is_distributed, is_main_process
from mmengine.logging import MMLogger
from mmengine.runner import BaseLoop, Runner
from mmengine.runner.checkpoint import _load_checkpoint
from mmengine.visualization import Visualizer

from irtbox.models.input_spec import config_test_pipeline, resolve_input_spec
from irtbox.registry import RUNNERS
from irtbox.utils.checkpoint import (checkpoint_problem, extract_state_dict, load_model_weights,
                                     safe_checkpoint_loaders)
from irtbox.utils.dist import ddp_wrapper_cfg
from irtbox.utils.fileio import atomic_write

from .run_identity import IDENTITY_KEY, config_identity, identity_differences
from .hooks.partial_fc import PartialFCHook, sharded_parameter_names
from .hooks.preemption import PreemptionHook
from .hooks.utils import bare_model
from .work_dir_lock import WorkDirLock, WorkDirLocked

__all__ = ['IrtboxRunner', 'ResumeRefused', 'find_resume_checkpoint', 'run_checkpoints']

_CKPT_NAME = re.compile(r'^(iter|epoch)_(\d+)\.pth$')

# MMEngine warnings of every run that no config can avoid: CheckpointHook and LoggerHook
# build a deprecated FileClient even when none is configured, and BaseMetric warns that
# irtbox's metrics have no prefix (their names, recall@1 ..., are unprefixed by design).
_UNACTIONABLE = ('"FileClient" will be deprecated in future',
                 '"HardDiskBackend" is the alias of "LocalBackend"',
                 'The prefix is not set in metric class')


class _DropUnactionable(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_UNACTIONABLE)


def run_checkpoints(work_dir: str) -> List[str]:
    """The ``iter_<n>.pth`` / ``epoch_<n>.pth`` files of ``work_dir``, newest (highest n) first."""
    if not osp.isdir(work_dir):
        return []
    found = [(int(m.group(2)), name) for name in os.listdir(work_dir)
             if (m := _CKPT_NAME.match(name))]
    return [osp.join(work_dir, name) for _, name in sorted(found, reverse=True)]


def _last_checkpoint_target(work_dir: str) -> Tuple[Optional[str], Optional[str]]:
    """(the path ``last_checkpoint`` names, or None; why it names none usable, or None)."""
    record = osp.join(work_dir, 'last_checkpoint')
    if not osp.isfile(record):
        return None, f'{record} is missing'
    with open(record) as f:
        target = f.read().strip()
    if not target:
        return None, f'{record} is empty'
    return target, None


def find_resume_checkpoint(work_dir: str) -> Tuple[Optional[str], List[str]]:
    """The newest intact checkpoint to resume from in ``work_dir`` and the warnings about
    every file skipped on the way (or about a missing/empty ``last_checkpoint``).

    Candidates: the target of ``last_checkpoint`` and the ``iter_*``/``epoch_*`` files,
    highest number first (a kill between writing a checkpoint and ``last_checkpoint``
    leaves the newer file complete, since writes are atomic). Intact: a complete zip
    archive whose members pass their CRC check (:func:`checkpoint_problem`).
    """
    warnings = []
    target, why_none = _last_checkpoint_target(work_dir)
    candidates = run_checkpoints(work_dir)
    if why_none is not None:
        if candidates:
            warnings.append(f'{why_none}; looking for the newest intact checkpoint in {work_dir}')
    elif target not in candidates and osp.abspath(target) not in map(osp.abspath, candidates):
        # A target outside the iter_/epoch_ pattern (another out_dir, a best_* file) first.
        candidates.insert(0, target)
    for path in candidates:
        problem = checkpoint_problem(path)
        if problem is None:
            return path, warnings
        warnings.append(f'skipped {path}: {problem}')
    return None, warnings


# Param group entries that are no training setting: the parameters, the learning rate
# (``_use_config_lr``), schedulers' bases, and how torch runs the update.
_NOT_SETTINGS = ('params', 'lr', 'foreach', 'capturable', 'differentiable', 'fused')


def _group_settings(group: dict) -> dict:
    """A param group's training settings (weight decay, momentum, betas, eps, ...)."""
    return {key: value for key, value in group.items()
            if key not in _NOT_SETTINGS and not key.startswith('initial_')}


def _plain(value):
    """``value`` with tuples as lists (a checkpoint may hold either)."""
    return list(map(_plain, value)) if isinstance(value, (list, tuple)) else value


class ResumeRefused(RuntimeError):
    """A checkpoint whose training state cannot continue under this config."""


def _optimizer_type_of(checkpoint: dict) -> Optional[str]:
    """The optimizer class name a checkpoint was trained with: recorded by
    :meth:`IrtboxRunner.save_checkpoint`, else read from the config MMEngine saves in it."""
    meta = checkpoint.get('meta') or {}
    if meta.get('optimizer_type'):
        return str(meta['optimizer_type'])
    text = meta.get('cfg')
    if not isinstance(text, str):
        return None
    try:
        from mmengine.config import Config
        kind = Config.fromstring(text, '.py').optim_wrapper.optimizer.type
    except Exception:  # no such entry, or a config that no longer parses
        return None
    return kind.rsplit('.', 1)[-1] if isinstance(kind, str) else getattr(kind, '__name__', None)


def _lr_schedulers(schedulers) -> list:
    """The learning-rate schedulers of ``schedulers`` (a list, or a dict of lists)."""
    if schedulers is None:
        return []
    groups = schedulers.values() if isinstance(schedulers, dict) else [schedulers]
    return [s for group in groups for s in (group if isinstance(group, (list, tuple)) else [])
            if getattr(s, 'param_name', None) == 'lr']


@RUNNERS.register_module()
class IrtboxRunner(Runner):
    """MMEngine's ``Runner`` with atomic checkpoint writes, a resume that falls back to the
    newest intact checkpoint, strict checkpoint loading and a non-finite-loss stop.

    Config keys beyond MMEngine's: ``load_partial`` (bool, default False): allow a
    checkpoint that matches the model only in part (missing/unexpected keys or shapes are
    then logged and skipped, MMEngine's own behaviour).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_partial = bool(self.cfg.get('load_partial', False))
        self.logger.addFilter(_DropUnactionable())

    def build_model(self, model):
        """MMEngine's model, carrying its :class:`~irtbox.models.input_spec.InputSpec` as
        ``model.input_spec`` (as ``init_model`` gives it), resolved once here from the
        config's test pipeline; None, with a warning, when the config has no test pipeline
        or the pipeline fails on a probe image."""
        model = super().build_model(model)
        if isinstance(model, torch.nn.Module) and getattr(model, 'input_spec', None) is None:
            model.input_spec = None
            if config_test_pipeline(self.cfg):
                try:
                    model.input_spec = resolve_input_spec(model, self.cfg)
                except ValueError as error:
                    self.logger.warning(f'the model has no input spec ({error}); a results '
                                        'file of this run carries no model identity')
        return model

    def build_logger(self, *args, **kwargs) -> MMLogger:
        """MMEngine's logger, under an experiment name no earlier run of this process used.

        MMEngine names the logger and the visualizer ``<config>_<timestamp>`` and reuses an
        instance of that name: two runs of one config started in the same second in one
        process (a notebook, a test session, sweeps in threads) would log into the first
        run's folder and leave the second without a log. A suffix keeps them apart.
        """
        base, n = self._experiment_name, 1
        while MMLogger.check_instance_created(self._experiment_name) or \
                Visualizer.check_instance_created(self._experiment_name):
            n += 1
            self._experiment_name = f'{base}_{n}'
        return super().build_logger(*args, **kwargs)

    def register_default_hooks(self, hooks=None) -> None:
        """MMEngine's default hooks plus ``non_finite_loss``, ``sync_norm_stats`` and
        ``preemption``; set
        ``default_hooks.<name>=None`` to drop one, or give its arguments."""
        hooks = dict(hooks or {})
        for name, hook_type in (('non_finite_loss', 'NonFiniteLossHook'),
                                ('sync_norm_stats', 'SyncNormStatsHook'),
                                ('preemption', 'PreemptionHook')):
            entry = hooks.get(name, {})
            if entry is None:  # MMEngine drops None only for its own default hooks
                hooks.pop(name)
            elif isinstance(entry, dict):  # e.g. only max_skipped given: the type is ours
                hooks[name] = {'type': hook_type, **entry}
        super().register_default_hooks(hooks)
        model = bare_model(self)
        if sharded_parameter_names(model):  # Partial FC: whole matrices in checkpoints
            self.register_hook(PartialFCHook())

    def wrap_model(self, model_wrapper_cfg, model):
        """MMEngine's, with the DDP wrapper on the device this process uses
        (:func:`~irtbox.utils.dist.ddp_wrapper_cfg`: not MMEngine's ``[LOCAL_RANK]``), and
        the sharded class centres of Partial FC layers kept out of DDP
        (``_ddp_params_and_buffers_to_ignore``): each rank updates its own rows and nothing
        of their size is all-reduced; :class:`~.hooks.partial_fc.PartialFCHook` (registered
        with the default hooks) makes checkpoints hold them whole."""
        names = sharded_parameter_names(model)
        if names:
            from torch.nn.parallel import DistributedDataParallel
            names = set(names) | set(getattr(model, '_ddp_params_and_buffers_to_ignore', ()))
            DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
                model, sorted(names))
        if is_distributed():
            model_wrapper_cfg = ddp_wrapper_cfg(
                model_wrapper_cfg, self.cfg.get('find_unused_parameters', False))
        return super().wrap_model(model_wrapper_cfg, model)

    def load_or_resume(self) -> None:
        """As MMEngine, but auto-resume falls back to the newest intact checkpoint and says
        when there is none."""
        if self._has_loaded or not (self._resume and self._load_from is None):
            return super().load_or_resume()
        path, warnings = find_resume_checkpoint(self.work_dir)
        for message in warnings:
            self.logger.warning(f'resume: {message}')
        if path is None:
            # No news by itself (a launcher resumes by default, so every first run gets
            # here): unusable checkpoints were warned about above and are below.
            self.logger.info(f'resume: no checkpoint in {self.work_dir}: starting from '
                             'iteration 0')
            self._warn_existing_checkpoints()
        else:
            self.logger.info(f'resume: from {path}')
            self.resume(path)
        self._has_loaded = True

    def train(self):
        """Train, holding the work dir's lock (rank 0; refused with :class:`WorkDirLocked`
        when another training holds it); warns first when a run from iteration 0 may
        overwrite earlier checkpoints."""
        lock = self._lock_work_dir()
        try:
            if not self._resume:
                self._warn_existing_checkpoints()
            return super().train()
        finally:
            for hook in self.hooks:  # a training that failed never reached after_train
                if isinstance(hook, PreemptionHook):
                    hook.restore_handlers()
            if lock is not None:
                lock.release()

    def _lock_work_dir(self) -> Optional[WorkDirLock]:
        """Rank 0 takes the work dir's lock; every rank learns whether it was refused."""
        lock, refusal = None, None
        if is_main_process() and '://' not in self.work_dir:
            try:
                lock = WorkDirLock(self.work_dir, warn=self.logger.warning).acquire()
            except WorkDirLocked as err:
                refusal = err.message  # the template: the command words {work_dir}
        if is_distributed():
            shared = [refusal]
            broadcast_object_list(shared, src=0)
            refusal = shared[0]
        if refusal is not None:
            raise WorkDirLocked(refusal)
        return lock

    def resume(self, filename: str, resume_optimizer: bool = True,
               resume_param_scheduler: bool = True, map_location='cpu') -> None:
        """MMEngine's resume, refusing a checkpoint of another optimizer type before its
        state is loaded (:class:`ResumeRefused`), and training at the config's learning rate
        and other optimizer settings (weight decay, momentum, betas, eps, ...) where they
        differ from the checkpoint's, with a warning naming both.

        The checkpoint is loaded onto the CPU (MMEngine's ``'default'`` is the GPU): the
        weights and optimizer state are copied to each parameter's device as they are
        loaded, the generator states must be CPU tensors, and Partial FC cuts this rank's
        rows out of whole matrices that need not fit on one GPU."""
        optimizer = getattr(self.optim_wrapper, 'optimizer', None)
        fresh = settings = None
        if resume_optimizer and optimizer is not None:
            fresh = [group.get('initial_lr', group['lr']) for group in optimizer.param_groups]
            settings = [_group_settings(group) for group in optimizer.param_groups]
        self._resuming_optimizer = fresh is not None
        try:
            super().resume(filename, resume_optimizer, resume_param_scheduler, map_location)
        finally:
            self._resuming_optimizer = False
        if fresh is not None:
            self._use_config_lr(fresh, filename)
            self._use_config_settings(settings, filename)

    def _use_config_settings(self, settings: List[dict], filename: str) -> None:
        """After the optimizer was resumed (which loads the checkpoint's param groups, their
        settings included): put back the config's settings (``settings``: each group's, as
        built from the config) where they differ, with one warning naming each; refuse a
        change the resumed state cannot follow (:class:`ResumeRefused`)."""
        groups = self.optim_wrapper.optimizer.param_groups
        if len(groups) != len(settings):
            raise ResumeRefused(
                f'resume from {filename}: it holds {len(groups)} optimizer param groups, the '
                f'config builds {len(settings)} (optim_wrapper.paramwise_cfg changed?); the '
                'optimizer state cannot be matched to the parameters.')
        changed = {}
        for group, wanted in zip(groups, settings):
            for key, value in wanted.items():
                if key in group and _plain(group[key]) != _plain(value):
                    changed.setdefault(key, (value, group[key]))
        # MMEngine's momentum schedulers keep the base under initial_momentum (also for betas)
        scheduled = sorted(k for k in changed if any(
            f'initial_{k}' in g or (k == 'betas' and 'initial_momentum' in g) for g in groups))
        if changed.get('amsgrad', (False, False))[0] and not changed['amsgrad'][1]:
            scheduled.append('amsgrad')  # its running maximum is not in the state
        if scheduled:
            raise ResumeRefused(
                f'resume from {filename}: the config changes optim_wrapper.optimizer.'
                f'{scheduled[0]} ({changed[scheduled[0]][1]!r} in the checkpoint, '
                f'{changed[scheduled[0]][0]!r} in the config), which the resumed optimizer '
                'state or its schedule cannot follow; set it back, or start over '
                '(--no-resume) from the weights with load_from.')
        if not changed:
            return
        for group, wanted in zip(groups, settings):
            group.update({k: v for k, v in wanted.items() if k in changed})
        said = ', '.join(f'{key} {_plain(new)!r} (checkpoint: {_plain(old)!r})'
                         for key, (new, old) in sorted(changed.items()))
        self.logger.warning(
            f'resume: the config changes optimizer settings of {filename}: training goes on '
            f'with the config\'s {said}. To keep the checkpoint\'s, set them back in '
            'optim_wrapper.optimizer.')

    def _check_optimizer_type(self, checkpoint: dict, filename: str) -> None:
        optimizer = getattr(self.optim_wrapper, 'optimizer', None)
        if optimizer is None or 'optimizer' not in checkpoint:
            return
        before, now = _optimizer_type_of(checkpoint), type(optimizer).__name__
        if before is not None and before != now:
            raise ResumeRefused(
                f'resume from {filename}: its optimizer is {before}, the config asks for {now}; '
                f"{before}'s state cannot continue as {now}'s. To start a fresh {now} run from "
                f'its weights: --cfg-options load_from={filename} --no-resume (loads the '
                'weights only).')

    def _check_identity(self, checkpoint: dict, filename: str) -> None:
        """Refuse to resume a checkpoint of another training (:mod:`run_identity`)."""
        meta = checkpoint.get('meta') or {}
        differences = identity_differences(meta.get(IDENTITY_KEY), config_identity(self.cfg))
        if differences:
            raise ResumeRefused(
                f'resume from {filename}: it was written by another training ('
                f'{"; ".join(differences)}); it is not resumed. Give this run another '
                '--work-dir, or --no-resume to start over in this one (its checkpoints of the '
                f'same name are overwritten); to start from its weights: --cfg-options '
                f'load_from={filename} --no-resume.')

    def _use_config_lr(self, fresh: List[float], filename: str) -> None:
        """After the optimizer and schedulers were resumed: when the config's base learning
        rates (``fresh``, one per param group) differ from the checkpoint's, scale each
        group's rate, its ``initial_lr`` and the schedulers' values by new / old."""
        groups = self.optim_wrapper.optimizer.param_groups
        if len(groups) != len(fresh):
            return
        old = [group.get('initial_lr', group['lr']) for group in groups]
        if all(abs(n - o) <= 1e-12 * max(abs(n), abs(o)) for n, o in zip(fresh, old)):
            return
        schedulers = _lr_schedulers(self.param_schedulers)
        for i, (group, new_lr, old_lr) in enumerate(zip(groups, fresh, old)):
            ratio = new_lr / old_lr if old_lr else None
            group['lr'] = group['lr'] * ratio if ratio is not None else new_lr
            if 'initial_lr' in group:
                group['initial_lr'] = new_lr
            for scheduler in schedulers:
                for name in ('base_values', '_last_value'):
                    values = getattr(scheduler, name, None)
                    if isinstance(values, list) and i < len(values):
                        values[i] = values[i] * ratio if ratio is not None else new_lr
        self.logger.warning(
            f'resume: the learning rate is {fresh[0]:g} in the config, {old[0]:g} in '
            f'{filename}: training goes on at the config\'s {fresh[0]:g} (each param group\'s '
            'rate and its schedule scaled by new / old). To keep the checkpoint\'s, set '
            f'optim_wrapper.optimizer.lr={old[0]:g}.')

    def _init_model_weights(self) -> None:
        """MMEngine's, with an ``init_cfg`` of type ``Pretrained`` read safely, and the
        sharded class centres of Partial FC layers left out of the broadcast from rank 0
        that follows (each rank holds other rows, of another size)."""
        model = bare_model(self)
        sharded = set(sharded_parameter_names(model))
        if not sharded:
            with safe_checkpoint_loaders():
                return super()._init_model_weights()
        if hasattr(model, 'init_weights'):
            with safe_checkpoint_loaders():
                model.init_weights()
        for name, value in model.state_dict().items():  # as MMEngine, but for the shards
            if name not in sharded:
                broadcast(value)

    def _training_parts(self) -> str:
        """How a checkpoint's training-only parts (heads, memories) are checked, from what
        this runner is doing: resuming needs them whole, a training run's ``load_from`` may
        lack them, evaluation (no train loop built) leaves them alone."""
        if not isinstance(self._train_loop, BaseLoop):
            return 'ignored'
        return 'required' if self._resume else 'optional'

    def _warn_existing_checkpoints(self) -> None:
        existing = run_checkpoints(self.work_dir)
        if existing:
            self.logger.warning(
                f'{self.work_dir} holds checkpoints of an earlier run '
                f'({", ".join(osp.basename(p) for p in existing)}); this run starts from '
                'iteration 0 and overwrites those of the same name: leave out --no-resume '
                '(resume=True) to continue that run, or give another --work-dir to keep both.')

    def load_checkpoint(self, filename: str, map_location='cpu', strict: bool = False,
                        revise_keys: list = [(r'^module\.', '')]):  # noqa: B006 (MMEngine's)
        """Load ``filename``'s weights into the model, refusing any key or shape mismatch
        (:func:`~irtbox.utils.checkpoint.load_model_weights`) unless ``load_partial``. The
        training-only parts (head, memories) must match to resume, may be absent for
        ``load_from``, and are left alone for evaluation (``tools/test.py``), which does
        not use them."""
        if self._load_partial:
            if getattr(self, '_resuming_optimizer', False):
                with safe_checkpoint_loaders():
                    checkpoint = _load_checkpoint(filename, map_location='cpu')
                self._check_identity(checkpoint, filename)
                self._check_optimizer_type(checkpoint, filename)
            with safe_checkpoint_loaders():
                return super().load_checkpoint(filename, map_location, strict, revise_keys)
        with safe_checkpoint_loaders():
            checkpoint = _load_checkpoint(filename, map_location=map_location)
        if getattr(self, '_resuming_optimizer', False):
            self._check_identity(checkpoint, filename)
            self._check_optimizer_type(checkpoint, filename)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        model = bare_model(self)
        state = extract_state_dict(checkpoint)
        for pattern, replacement in revise_keys:
            state = {re.sub(pattern, replacement, k): v for k, v in state.items()}
        load_model_weights(model, state, source=filename, training_parts=self._training_parts())
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint

    def call_hook(self, fn_name: str, **kwargs) -> None:
        """MMEngine's, remembering which stage is running (``save_checkpoint`` needs it)."""
        outer, self._hook_stage = getattr(self, '_hook_stage', None), fn_name
        try:
            super().call_hook(fn_name, **kwargs)
        finally:
            self._hook_stage = outer

    def save_checkpoint(self, out_dir: str, filename: str, file_client_args=None,
                        save_optimizer: bool = True, save_param_scheduler: bool = True,
                        meta: Optional[dict] = None, by_epoch: bool = True, backend_args=None):
        """Called on every rank: the hooks' ``prepare_checkpoint`` run on all of them, then
        rank 0 saves as MMEngine does, into a temporary file that is fsynced and then
        renamed to ``filename``: the name only ever holds a complete checkpoint."""
        for hook in self.hooks:
            prepare = getattr(hook, 'prepare_checkpoint', None)
            if prepare is not None:
                prepare(self)
        if not is_main_process():
            return
        meta = dict(meta or {})
        optimizer = getattr(getattr(self, 'optim_wrapper', None), 'optimizer', None)
        if optimizer is not None:  # checked on resume: another type is refused
            meta.setdefault('optimizer_type', type(optimizer).__name__)
        meta.setdefault(IDENTITY_KEY, config_identity(self.cfg))  # checked on resume too
        if getattr(self, '_hook_stage', None) not in ('after_train_iter', 'after_train_epoch'):
            # MMEngine counts the iteration (epoch) in progress as done, which holds inside
            # after_train_iter (after_train_epoch) only; after validation it is one past.
            meta.setdefault('epoch', self.epoch)
            meta.setdefault('iter', self.iter)
        args = (file_client_args, save_optimizer, save_param_scheduler, meta, by_epoch,
                backend_args)
        if '://' in out_dir:  # remote storage: its backend's own semantics
            return super().save_checkpoint(out_dir, filename, *args)
        atomic_write(osp.join(out_dir, filename),
                     lambda tmp: super(IrtboxRunner, self).save_checkpoint(
                         out_dir, osp.basename(tmp), *args))
