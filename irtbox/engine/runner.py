"""``IrtboxRunner``: MMEngine's ``Runner`` with checkpoints that cannot silently lose work. It keeps
only what happens inside ``Runner`` methods no hook reaches: the atomic checkpoint write,
auto-resume from the newest *intact* checkpoint, strict and safe loading, the DDP wrapper on this
process's device (Partial FC's rows kept out), a log of each run's own, and a ``train_finally`` hook
stage. The rest is done by :data:`DEFAULT_HOOKS`."""
import itertools
import logging
import os.path as osp
import re
from pathlib import Path
from typing import List, Optional, Tuple

import torch
from mmengine.dist import broadcast, broadcast_object_list, is_distributed, is_main_process
from mmengine.logging import print_log
from mmengine.runner import CheckpointLoader, Runner
from mmengine.runner.checkpoint import load_state_dict

from irtbox.models.input_spec import fixed_input_size
from irtbox.registry import RUNNERS
from irtbox.utils.checkpoint import (checkpoint_problem, extract_state_dict, load_model_weights,
                                     safe_checkpoint_loaders)
from irtbox.utils.dist import ddp_wrapper_cfg, resolve_device
from irtbox.utils.fileio import atomic_write
from irtbox.utils.mmengine_compat import RunnerPrivates, has_loaded, set_has_loaded
from irtbox.utils.terminal import keep_dumps_off_terminal

from .hooks.checkpoint import run_checkpoints
from .hooks.partial_fc import keep_out_of_ddp, sharded_parameter_names
from .hooks.utils import bare_model, is_training
from .optim_wrappers import bf16_inference

__all__ = ['DEFAULT_HOOKS', 'IrtboxRunner', 'find_resume_checkpoint', 'run_checkpoints']

#: The default hooks irtbox adds to MMEngine's (name: type). Every config gets them;
#: ``default_hooks.<name>=None`` drops one, ``default_hooks.<name>=dict(...)`` configures it.
DEFAULT_HOOKS = dict(work_dir_lock='WorkDirLockHook', resume_check='ResumeCheckHook',
                     partial_fc='PartialFCHook', non_finite_loss='NonFiniteLossHook',
                     sync_norm_stats='SyncNormStatsHook', preemption='PreemptionHook')

# MMEngine warnings of every run that no config can avoid: CheckpointHook and LoggerHook
# build a deprecated FileClient even when none is configured, and BaseMetric warns that
# irtbox's metrics have no prefix (their names, recall@1 ..., are unprefixed by design).
_UNACTIONABLE = ('"FileClient" will be deprecated in future',
                 '"HardDiskBackend" is the alias of "LocalBackend"',
                 'The prefix is not set in metric class')
_RUNS = itertools.count(1)  # the runners built in this process
_FUSABLE = re.compile(r'^(torch\.optim\.)?AdamW?$')  # the optimizers built fused on a GPU


def find_resume_checkpoint(work_dir: str) -> Tuple[Optional[str], List[str]]:
    """The newest intact checkpoint in ``work_dir`` and the warnings about every file skipped.
    Candidates: the target of ``last_checkpoint``, then the ``iter_*``/``epoch_*`` files, highest
    number first (a kill between writing a checkpoint and ``last_checkpoint`` leaves the newer file
    complete). Intact: :func:`checkpoint_problem` finds nothing."""
    warnings, record = [], osp.join(work_dir, 'last_checkpoint')
    target = Path(record).read_text().strip() if osp.isfile(record) else None
    candidates = run_checkpoints(work_dir)
    if not target:
        if candidates:
            warnings.append(f'{record} is {"empty" if osp.isfile(record) else "missing"}; '
                            f'looking for the newest intact checkpoint in {work_dir}')
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
class IrtboxRunner(RunnerPrivates, Runner):
    """MMEngine's ``Runner`` with irtbox's checkpoints and default hooks (see the module). Config
    key beyond MMEngine's: ``load_partial`` (default False): allow a checkpoint that matches the
    model only in part (mismatches logged and skipped, as MMEngine does). ``resuming_from``: the
    checkpoint :meth:`resume` is loading, while it loads it."""

    def __init__(self, *args, load_from: Optional[str] = None, resume: bool = False, **kwargs):
        # MMEngine names a run <config>_<timestamp> and reuses a logger or visualizer of that
        # name: a later run of this process, started within the same second, logs apart.
        run = next(_RUNS)
        if run > 1:
            cfg = kwargs.get('cfg') or {}
            stem = osp.splitext(osp.basename(getattr(cfg, 'filename', None) or 'run'))[0]
            kwargs['experiment_name'] = f"{kwargs.get('experiment_name') or stem}-{run}"
        super().__init__(*args, load_from=load_from, resume=resume, **kwargs)
        self.auto_resume = bool(resume) and load_from is None
        self.resuming_from: Optional[str] = None
        self.logger.addFilter(lambda record: not str(record.msg).startswith(_UNACTIONABLE))

    def build_logger(self, *args, **kwargs):
        """MMEngine's logger, its start-up dump kept for the log file
        (:func:`~irtbox.utils.terminal.keep_dumps_off_terminal`)."""
        logger = super().build_logger(*args, **kwargs)
        keep_dumps_off_terminal(logger)
        return logger

    def log_env(self, env_cfg: dict) -> None:
        """MMEngine's dump of the environment and config, where a handler of the logger shows
        it: a rank > 0 without a log file of its own shows only errors, and collected the
        environment (importing torchvision, running the C compiler: about a second of each
        process start) for nothing."""
        if self.logger.isEnabledFor(logging.INFO) and any(
                handler.level <= logging.INFO for handler in self.logger.handlers):
            super().log_env(env_cfg)

    def register_default_hooks(self, hooks=None) -> None:
        """MMEngine's default hooks plus :data:`DEFAULT_HOOKS`; set
        ``default_hooks.<name>=None`` to drop one, or give its arguments."""
        hooks = dict(hooks or {})
        for name, hook_type in DEFAULT_HOOKS.items():
            entry = hooks.get(name, {})
            if entry is None:  # MMEngine drops None only for its own default hooks
                hooks.pop(name)
            elif isinstance(entry, dict):  # e.g. only max_skipped given: the type is ours
                hooks[name] = {'type': hook_type, **entry}
        super().register_default_hooks(hooks)

    def setup_env(self, env_cfg: dict) -> None:
        """MMEngine's, and

        - ``env_cfg.allow_tf32``: TensorFloat-32 for the float32 matrix products and
          convolutions a GPU runs outside autocast (validation, float32 losses); absent: torch's
          defaults;
        - ``env_cfg.cudnn_benchmark='auto'``: cuDNN times its convolution algorithms once per
          input shape, on a GPU where every pipeline of the config gives one input size
          (:func:`~irtbox.models.input_spec.fixed_input_size`); with images of their own sizes it
          would time them again at every batch; off with ``randomness.deterministic=True``.
          True / False force it (MMEngine's key).

        Neither changes anything on a CPU."""
        benchmark = env_cfg.get('cudnn_benchmark')
        if benchmark == 'auto':  # off where MMEngine would turn it off, warning, for determinism
            deterministic = (self.cfg.get('randomness') or {}).get('deterministic')
            size = (fixed_input_size(self.cfg) if resolve_device().type == 'cuda'
                    and not deterministic else None)
            benchmark = size is not None
            if benchmark:  # logged here: the logger does not exist yet
                print_log(f'cudnn.benchmark on: every pipeline gives {size[0]} x {size[1]} '
                          'inputs', logger='current')
        super().setup_env({**env_cfg, 'cudnn_benchmark': benchmark})
        if 'allow_tf32' in env_cfg:
            torch.backends.cuda.matmul.allow_tf32 = bool(env_cfg['allow_tf32'])
            torch.backends.cudnn.allow_tf32 = bool(env_cfg['allow_tf32'])

    @staticmethod
    def build_dataloader(dataloader, seed=None, diff_rank_seed=False):
        """MMEngine's, with ``pin_memory`` on by default where CUDA is (batches are copied to the
        GPU while it computes); a config's own ``pin_memory`` wins."""
        if isinstance(dataloader, dict) and torch.cuda.is_available():
            dataloader = {'pin_memory': True, **dataloader}
        return Runner.build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)

    def build_model(self, model):
        """MMEngine's, with the model's ``bf16_inference`` (testing under bf16 autocast) set
        from the config (:func:`~irtbox.engine.optim_wrappers.bf16_inference`)."""
        model = super().build_model(model)
        if hasattr(model, 'bf16_inference'):
            model.bf16_inference = bf16_inference(self.cfg)
        return model

    def compile_model(self, target: str) -> None:
        """``compile`` in the config (True, or a dict of ``torch.compile``'s arguments): the
        model's backbone and necks compiled in place (``nn.Module.compile``; the state dict
        keeps its keys), one graph for training and one for testing. MMEngine compiles the
        whole training step instead, which here recompiled at every step (the batch's sample
        metadata, the cross-batch memory's counters) until torch gave up on it. A model
        without a backbone and necks: MMEngine's."""
        setting, model = self.cfg.get('compile'), bare_model(self)
        parts = [getattr(model, name, None) for name in ('backbone', 'neck')]
        if not setting or not all(isinstance(part, torch.nn.Module) for part in parts):
            return super().compile_model(target)
        for part in parts:
            part.compile(**({} if setting is True else dict(setting)))
        self.logger.info('compile: the backbone and necks are compiled; the first iterations '
                         '(and the first test) take longer')

    def build_optim_wrapper(self, optim_wrapper):
        """MMEngine's, with Adam and AdamW ``fused`` where every parameter is on a GPU (one
        kernel for the step instead of several per tensor); a config's own ``fused`` wins."""
        optimizer = optim_wrapper.get('optimizer') if isinstance(optim_wrapper, dict) else None
        if isinstance(optimizer, dict) and _FUSABLE.match(str(
                getattr(optimizer.get('type'), '__name__', optimizer.get('type')))) and all(
                p.is_cuda for p in self.model.parameters()):
            optim_wrapper = {**optim_wrapper, 'optimizer': {'fused': True, **optimizer}}
        return super().build_optim_wrapper(optim_wrapper)

    def wrap_model(self, model_wrapper_cfg, model):
        """MMEngine's, with the DDP wrapper on this process's device and Partial FC's sharded
        class centres kept out of DDP. Called from ``__init__``, before any hook exists."""
        keep_out_of_ddp(model)
        if is_distributed():
            model_wrapper_cfg = ddp_wrapper_cfg(
                model_wrapper_cfg, self.cfg.get('find_unused_parameters', False))
        return super().wrap_model(model_wrapper_cfg, model)

    def load_or_resume(self) -> None:
        """As MMEngine, but auto-resume falls back to the newest intact checkpoint and says
        when there is none; rank 0 chooses it and every rank resumes that one."""
        if has_loaded(self) or not self.auto_resume:
            return super().load_or_resume()
        # Rank 0 alone reads the work dir: ranks that saw it differently (NFS attribute
        # caching after a restart, a read error on one node) would resume different
        # iterations, and nothing re-syncs weights loaded after DDP is built.
        decision, error = [None], None
        if is_main_process():
            try:
                decision[0] = find_resume_checkpoint(self.work_dir)
            except Exception as err:  # noqa: BLE001 (the other ranks must learn it, not wait)
                decision[0], error = f'{type(err).__name__}: {err}', err
        if is_distributed():
            broadcast_object_list(decision, src=0)
        if error is not None:
            raise error
        if isinstance(decision[0], str):
            raise RuntimeError(f'resume: rank 0 could not choose a checkpoint in '
                               f'{self.work_dir}: {decision[0]}')
        path, warnings = decision[0]
        for message in warnings:
            self.logger.warning(f'resume: {message}')
        if path is None:
            # No news by itself (a launcher resumes by default, so every first run gets
            # here): unusable checkpoints were warned about above.
            self.logger.info(f'resume: no checkpoint in {self.work_dir}: starting from '
                             'iteration 0')
        else:
            self.logger.info(f'resume: from {path}')
            self.resume(path)
        set_has_loaded(self)

    def train(self):
        """MMEngine's training; then, also when it raises, the hooks' ``train_finally`` stage
        (MMEngine has no hook stage for a failed run)."""
        try:
            return super().train()
        finally:
            self.call_hook('train_finally')

    def resume(self, filename: str, resume_optimizer: bool = True,
               resume_param_scheduler: bool = True, map_location='cpu') -> None:
        """MMEngine's resume, with :attr:`resuming_from` set while the checkpoint loads. Onto
        the CPU (MMEngine's default is the GPU): the generator states must be CPU tensors, and
        Partial FC cuts this rank's rows out of matrices that need not fit on one GPU."""
        self.resuming_from = filename
        try:
            super().resume(filename, resume_optimizer, resume_param_scheduler, map_location)
        finally:
            self.resuming_from = None

    def init_model_weights(self) -> None:
        """MMEngine's, with a ``Pretrained`` ``init_cfg`` read safely, and Partial FC's sharded
        class centres left out of the broadcast from rank 0 (each rank holds other rows)."""
        model = bare_model(self)
        sharded = set(sharded_parameter_names(model))
        with safe_checkpoint_loaders():
            if not sharded:
                return super().init_model_weights()
            if hasattr(model, 'init_weights'):
                model.init_weights()
        for name, value in model.state_dict().items():  # as MMEngine, but for the shards
            if name not in sharded:
                broadcast(value)

    def load_checkpoint(self, filename: str, map_location='cpu', strict: bool = False,
                        revise_keys: list = [(r'^module\.', '')]):  # noqa: B006 (MMEngine's)
        """Load ``filename``'s weights, refusing any key or shape mismatch unless
        ``load_partial``. The training-only parts (head, memories) must match to resume, may
        be absent for ``load_from``, and are ignored for evaluation."""
        with safe_checkpoint_loaders():
            checkpoint = CheckpointLoader.load_checkpoint(filename, map_location=map_location)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        state = extract_state_dict(checkpoint)
        for pattern, replacement in revise_keys:
            state = {re.sub(pattern, replacement, k): v for k, v in state.items()}
        if self.cfg.get('load_partial'):  # MMEngine's load: mismatches logged and skipped
            load_state_dict(bare_model(self), state, strict, logger=self.logger)
        else:
            parts = (('required' if self.resuming_from else 'optional') if is_training(self)
                     else 'ignored')
            load_model_weights(bare_model(self), state, source=filename, training_parts=parts)
        set_has_loaded(self)
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint

    def save_checkpoint(self, out_dir: str, filename: str, file_client_args=None,
                        save_optimizer: bool = True, save_param_scheduler: bool = True,
                        meta: Optional[dict] = None, by_epoch: bool = True, backend_args=None):
        """Called on every rank: the hooks' ``prepare_checkpoint`` stage runs on all, then
        rank 0 saves atomically: ``filename`` only ever holds a complete checkpoint."""
        self.call_hook('prepare_checkpoint')
        if not is_main_process():
            return
        args = (file_client_args, save_optimizer, save_param_scheduler, meta, by_epoch,
                backend_args)
        if '://' in out_dir:  # remote storage: its backend's own semantics
            return super().save_checkpoint(out_dir, filename, *args)
        atomic_write(osp.join(out_dir, filename),
                     lambda tmp: super(IrtboxRunner, self).save_checkpoint(
                         out_dir, osp.basename(tmp), *args))
