"""``IrtboxRunner``: MMEngine's ``Runner`` with checkpoints that cannot silently lose work.

- Saving is atomic (:func:`~irtbox.utils.fileio.atomic_write`): a checkpoint is written to
  a temporary file in the same directory, fsynced, then renamed to its name (the directory
  fsynced too), so a kill while saving never leaves a truncated file under a checkpoint's
  name.
- ``--resume`` without a file resumes from the newest *intact* checkpoint of the work dir
  (``last_checkpoint``'s target or the ``iter_*``/``epoch_*`` files), warning about every
  file it skips; with none it says so and starts from iteration 0.
- Loading (``load_from``, ``tools/test.py CKPT``, ``--resume``) refuses a checkpoint whose
  keys or shapes differ from the model (:func:`irtbox.utils.checkpoint.load_model_weights`)
  unless the config sets ``load_partial = True``.
- A run starting from iteration 0 in a work dir that holds checkpoints says which it may
  overwrite.
- Checkpoints are prepared on every rank: a hook with a ``prepare_checkpoint(runner)``
  method (e.g. the PCA / whitening fits, which run collectives) is called on all ranks
  before rank 0 writes the file, so a DDP run never waits on rank 0 alone.
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

from mmengine.dist import is_main_process
from mmengine.logging import MMLogger
from mmengine.model import is_model_wrapper
from mmengine.runner import BaseLoop, Runner
from mmengine.runner.checkpoint import _load_checkpoint
from mmengine.visualization import Visualizer

from irtbox.registry import RUNNERS
from irtbox.utils.checkpoint import (checkpoint_problem, extract_state_dict, load_model_weights,
                                     safe_checkpoint_loaders)
from irtbox.utils.fileio import atomic_write

__all__ = ['IrtboxRunner', 'find_resume_checkpoint', 'run_checkpoints']

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
        """MMEngine's default hooks plus ``non_finite_loss`` and ``sync_norm_stats``; set
        ``default_hooks.<name>=None`` to drop one, or give its arguments."""
        hooks = dict(hooks or {})
        for name, hook_type in (('non_finite_loss', 'NonFiniteLossHook'),
                                ('sync_norm_stats', 'SyncNormStatsHook')):
            entry = hooks.get(name, {})
            if entry is None:  # MMEngine drops None only for its own default hooks
                hooks.pop(name)
            elif isinstance(entry, dict):  # e.g. only max_skipped given: the type is ours
                hooks[name] = {'type': hook_type, **entry}
        super().register_default_hooks(hooks)

    def load_or_resume(self) -> None:
        """As MMEngine, but auto-resume falls back to the newest intact checkpoint and says
        when there is none."""
        if self._has_loaded or not (self._resume and self._load_from is None):
            return super().load_or_resume()
        path, warnings = find_resume_checkpoint(self.work_dir)
        for message in warnings:
            self.logger.warning(f'resume: {message}')
        if path is None:
            self.logger.warning(f'resume: no checkpoint in {self.work_dir}: starting from '
                                'iteration 0')
            self._warn_existing_checkpoints()
        else:
            self.logger.info(f'resume: from {path}')
            self.resume(path)
        self._has_loaded = True

    def train(self):
        """Train; warns first when a run from iteration 0 may overwrite earlier checkpoints."""
        if not self._resume:
            self._warn_existing_checkpoints()
        return super().train()

    def _init_model_weights(self) -> None:
        """MMEngine's, with an ``init_cfg`` of type ``Pretrained`` read safely."""
        with safe_checkpoint_loaders():
            super()._init_model_weights()

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
                'iteration 0 and overwrites those of the same name: use --resume to continue '
                'that run, or another --work-dir to keep both.')

    def load_checkpoint(self, filename: str, map_location='cpu', strict: bool = False,
                        revise_keys: list = [(r'^module\.', '')]):  # noqa: B006 (MMEngine's)
        """Load ``filename``'s weights into the model, refusing any key or shape mismatch
        (:func:`~irtbox.utils.checkpoint.load_model_weights`) unless ``load_partial``. The
        training-only parts (head, memories) must match to resume, may be absent for
        ``load_from``, and are left alone for evaluation (``tools/test.py``), which does
        not use them."""
        if self._load_partial:
            with safe_checkpoint_loaders():
                return super().load_checkpoint(filename, map_location, strict, revise_keys)
        with safe_checkpoint_loaders():
            checkpoint = _load_checkpoint(filename, map_location=map_location)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        model = self.model.module if is_model_wrapper(self.model) else self.model
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
