"""Train a retrieval model from a config.

Examples:
  python tools/train.py configs/irt/irt-r_deit-s_1xb64-35k_sop.py
  python tools/train.py CONFIG --work-dir work_dirs/run1 --cfg-options train_cfg.max_iters=100
  python tools/train.py CONFIG --no-resume         # start over in a work dir with checkpoints
  python tools/train.py CONFIG --nproc 8            # 8 processes (GPUs, or CPU with gloo);
                                                   # tools/dist_train.sh CONFIG 8 is the same
  python tools/train.py CONFIG --nproc 8 --max-restarts 3   # a dead worker restarts the group

Pre-emption: on SIGTERM or SIGUSR1 every rank finishes its iteration, one checkpoint is saved
and the command exits with status 75 (pre-empted; under Slurm a SIGUSR1 also requeues the
job). However it is started (one process, --nproc, a launcher, a restarted or requeued job),
training resumes from the newest intact checkpoint of the work dir by default (a checkpoint
of another training there is refused) and the log says which; --no-resume starts from
iteration 0. docs/reliability.md, "What resumes, and how".
"""
import os

from irtbox.cli import add_cfg_options, add_verbose_argument, command_parser
from irtbox.cli.launch import add_launch_arguments, relaunch
from irtbox.cli.prechecks import check_inputs

__all__ = ['parse_args', 'main', 'refusal_message']


def parse_args(argv=None):
    parser = command_parser('Train an irtbox retrieval model.', __doc__)
    parser.add_argument('config', help='config file (Python), e.g. configs/irt/...py')
    parser.add_argument('--work-dir', help='where logs and checkpoints go '
                        '(default: ./work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', const='auto', metavar='CKPT',
                        help='resume from CKPT, or from the latest checkpoint of the work dir '
                        'when no path is given (model, optimizer, schedulers, iteration, memory, '
                        'data position, random generators); without a path it is the default')
    parser.add_argument('--no-resume', action='store_true',
                        help='start from iteration 0 even when the work dir holds checkpoints '
                        '(those of the same name are overwritten)')
    parser.add_argument('--amp', action='store_true',
                        help='mixed precision (needs a GPU): AmpOptimWrapper with dynamic loss scale')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by the actual total batch size '
                        '(auto_scale_lr.base_batch_size in the config)')
    add_cfg_options(parser, 'override config entries, e.g. train_cfg.max_iters=100 '
                        'model.head.loss_weights.koleo=0.5')
    add_verbose_argument(parser)
    add_launch_arguments(parser)
    args = parser.parse_args(argv)
    if args.no_resume and args.resume is not None:
        parser.error('--resume and --no-resume: give one of them')
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def build_cfg(args):
    """The config of the training ``args`` ask for, its inputs checked by :func:`main` first
    (:func:`~irtbox.cli.prechecks.check_inputs`: keys, values, training parts, flags)."""
    from irtbox.apis import check_checkpoint, load_run_config
    cfg = load_run_config(args.config, args.cfg_options, args.work_dir, args.launcher)
    if args.amp:
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.auto_scale_lr:
        cfg.auto_scale_lr.enable = True
    # Without --resume: resumed however the training is started (one process, a launcher, a
    # restarted or requeued job), so that "the same command resumes" holds for every way.
    if args.resume == 'auto' or (args.resume is None and not args.no_resume
                                 and resumes_here(cfg)):
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        try:
            cfg.resume, cfg.load_from = True, check_checkpoint(args.resume)
        except FileNotFoundError as error:
            raise SystemExit(f'--resume: {error}')
    return cfg


def _bf16(cfg) -> bool:
    return (cfg.get('optim_wrapper') or {}).get('type') == 'BF16AutocastOptimWrapper'


def flag_problems(args, cfg) -> list:
    """What is wrong with ``--amp`` / ``--auto-scale-lr`` for ``cfg``: a line each (the
    config alone; torch-free)."""
    problems = []
    if args.amp and _bf16(cfg):
        problems.append(f'--amp: {args.config} already trains under bf16 autocast on GPUs '
                        'that support it (BF16AutocastOptimWrapper, optim_wrapper.enabled); '
                        "--amp would replace that by float16 with loss scaling. Leave it "
                        'out, or set optim_wrapper.enabled=True to force bf16.')
    if args.auto_scale_lr and 'auto_scale_lr' not in cfg:
        problems.append(f'--auto-scale-lr: {args.config} has no auto_scale_lr entry '
                        '(e.g. auto_scale_lr = dict(base_batch_size=64)).')
    return problems


def amp_device_problems(args, cfg) -> list:
    """``--amp`` where torch sees no CUDA GPU (asked of torch, so after the torch-free checks)."""
    import torch
    if args.amp and not _bf16(cfg) and not torch.cuda.is_available():
        return ['--amp needs a CUDA GPU; none is available here.']
    return []


_RESTARTS = (('TORCHELASTIC_RESTART_COUNT', "torchrun's agent"),
             ('SLURM_RESTART_COUNT', 'Slurm (requeued)'))


def restarted(env=None) -> str:
    """How this process is a restart of its job, e.g. ``"restart 1 by torchrun's agent"``
    (``TORCHELASTIC_RESTART_COUNT``; a Slurm requeue: ``SLURM_RESTART_COUNT``); '' if not."""
    env = os.environ if env is None else env
    return ', '.join(f'restart {env[key]} by {who}' for key, who in _RESTARTS
                     if env.get(key, '0').strip() not in ('', '0'))


def resumes_here(cfg) -> bool:
    """Whether resuming by default takes the place of the config's ``load_from`` (a
    fine-tuning's starting weights): only once the work dir holds checkpoints of this run."""
    if not cfg.get('load_from'):
        return True
    from irtbox.engine.runner import run_checkpoints
    return bool(run_checkpoints(cfg.work_dir)) or os.path.isfile(
        os.path.join(cfg.work_dir, 'last_checkpoint'))


def training_parts_problem(cfg, config) -> str:
    """Why ``cfg`` cannot train (a test-only config), '' when it can: one line rather than
    MMEngine's "`_train_loop` should not be None"."""
    missing = [key for key in ('train_dataloader', 'train_cfg', 'optim_wrapper')
               if not cfg.get(key)]
    return (f'{config}: cannot train: it sets no {", ".join(missing)} (a test-only config); '
            f'evaluate it with tools/test.py {config} [CHECKPOINT], or train a config that '
            'has them.') if missing else ''


def batch_sampler_problem(cfg) -> str:
    """A batch-composing sampler (M-per-class, ...) must agree with the loader's batch size:
    the line that says it does not, else ''."""
    loader = cfg.get('train_dataloader') or {}
    sampler = loader.get('sampler') or {}
    if 'batch_size' in sampler and sampler['batch_size'] != loader.get('batch_size'):
        return (f'{cfg.filename}: train_dataloader.sampler.batch_size={sampler["batch_size"]} '
                f'differs from train_dataloader.batch_size={loader.get("batch_size")}; the '
                'sampler composes whole batches, so set both to the same value.')
    return ''


def check_batch_sampler(cfg):
    """:func:`batch_sampler_problem`, raised as ``SystemExit``."""
    problem = batch_sampler_problem(cfg)
    if problem:
        raise SystemExit(problem)


def main(argv=None):
    args = parse_args(argv)
    # Before the environment and config dump, and under --nproc before any rank starts.
    check_inputs(args.config, args.cfg_options, ('train_dataloader', 'val_dataloader'),
                 checkpoint=None if args.resume in (None, 'auto') else args.resume,
                 checkpoint_argument='--resume',
                 more=lambda cfg: [p for p in [training_parts_problem(cfg, args.config),
                                               batch_sampler_problem(cfg)] if p]
                 + flag_problems(args, cfg),
                 more_with_torch=lambda cfg: amp_device_problems(args, cfg))
    relaunch('train', args, argv)
    cfg = build_cfg(args)
    from irtbox.apis import build_runner
    from irtbox.engine import PREEMPTED_EXIT_STATUS, NonFiniteLossError, Preempted
    from irtbox.engine.hooks.preemption import requeue_slurm_job
    from irtbox.engine.hooks import ResumeRefused
    from irtbox.engine.work_dir_lock import WorkDirLocked
    from irtbox.models.backbones import PretrainedWeightsUnavailable
    try:
        runner = build_runner(cfg)
    except PretrainedWeightsUnavailable as error:  # one line per rank, not a hub traceback
        raise SystemExit(f'{args.config}: {error}') from error
    from irtbox.cli.header import RunHeader
    runner.register_hook(RunHeader(args.config))
    if restarted():
        runner.logger.warning(f'this job was restarted ({restarted()}): '
                              + ('resuming from the newest intact checkpoint of the work dir'
                                 if cfg.resume else 'starting over (--no-resume)'))
    try:
        runner.train()
    except Preempted as stop:  # saved: the same command goes on from that checkpoint
        runner.logger.warning(str(stop) if not args.no_resume else
                              f'{stop}, once run without --no-resume')
        from mmengine.dist import is_main_process
        # A sweep's submitit task requeues itself once this training has ended.
        if (stop.signal_name == 'SIGUSR1' and is_main_process()
                and not os.environ.get('SUBMITIT_EXECUTOR')):
            requeued = requeue_slurm_job()
            if requeued:
                runner.logger.warning(requeued)
        raise SystemExit(PREEMPTED_EXIT_STATUS) from stop
    except NonFiniteLossError as err:  # a clear stop, not a traceback: the message says it all
        runner.logger.error(str(err))
        raise SystemExit(1) from err
    except (WorkDirLocked, ResumeRefused) as err:  # one line: what happened, what to do
        message = refusal_message(err)
        runner.logger.error(message)
        raise SystemExit(f'{args.config}: {message}') from err


def refusal_message(err) -> str:
    """A refused training (:class:`~irtbox.engine.work_dir_lock.WorkDirLocked`,
    :class:`~irtbox.engine.hooks.ResumeRefused`) and what to do, in this command's options."""
    from irtbox.engine.work_dir_lock import WorkDirLocked
    if isinstance(err, WorkDirLocked):
        return (f'{err.problem}. Give this one another --work-dir, or wait for that one to '
                f'end. (If it is over, delete {err.lock}.)')
    where = ('Give this run another --work-dir, or --no-resume to start over in this one (its '
             'checkpoints of the same name are overwritten); to start ' if err.other_training
             else 'To start ')
    return (f'resume from {err.checkpoint}: {err.problem}. {where}from its weights: '
            f'--cfg-options load_from={err.checkpoint} --no-resume (loads the weights only).')
