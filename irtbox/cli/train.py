"""Train a retrieval model from a config.

Examples:
  python tools/train.py configs/irt/irt-r_deit-s_1xb64-35k_sop.py
  python tools/train.py CONFIG --work-dir work_dirs/run1 --cfg-options train_cfg.max_iters=100
  python tools/train.py CONFIG --resume            # latest checkpoint in the work dir
  python tools/train.py CONFIG --nproc 8            # 8 processes (GPUs, or CPU with gloo);
                                                   # tools/dist_train.sh CONFIG 8 is the same
"""
import argparse
import os

from irtbox.cli.launch import add_nproc_argument, relaunch
from irtbox.utils.config import DictAction

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train an irtbox retrieval model.', epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config file (Python), e.g. configs/irt/...py')
    parser.add_argument('--work-dir', help='where logs and checkpoints go '
                        '(default: ./work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', const='auto', metavar='CKPT',
                        help='resume from CKPT, or from the latest checkpoint of the work dir '
                        'when no path is given (model, optimizer, schedulers, iteration, memory)')
    parser.add_argument('--amp', action='store_true',
                        help='mixed precision (needs a GPU): AmpOptimWrapper with dynamic loss scale')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by the actual total batch size '
                        '(auto_scale_lr.base_batch_size in the config)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE',
                        help='override config entries, e.g. train_cfg.max_iters=100 '
                        'model.head.loss_weights.koleo=0.5')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='job launcher: none (single process), pytorch (torchrun), slurm (srun)')
    add_nproc_argument(parser)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def build_cfg(args):
    import torch

    from irtbox.apis import check_checkpoint, load_run_config
    cfg = load_run_config(args.config, args.cfg_options, args.work_dir, args.launcher)
    check_training_parts(cfg, args.config)
    if args.amp:
        if cfg.optim_wrapper.get('type') == 'BF16AutocastOptimWrapper':
            raise SystemExit(f'--amp: {args.config} already trains under bf16 autocast on GPUs '
                             'that support it (BF16AutocastOptimWrapper, optim_wrapper.enabled); '
                             "--amp would replace that by float16 with loss scaling. Leave it "
                             'out, or set optim_wrapper.enabled=True to force bf16.')
        if not torch.cuda.is_available():
            raise SystemExit('--amp needs a CUDA GPU; none is available here.')
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.auto_scale_lr:
        if 'auto_scale_lr' not in cfg:
            raise SystemExit(f'--auto-scale-lr: {args.config} has no auto_scale_lr entry '
                             '(e.g. auto_scale_lr = dict(base_batch_size=64)).')
        cfg.auto_scale_lr.enable = True
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        try:
            cfg.resume, cfg.load_from = True, check_checkpoint(args.resume)
        except FileNotFoundError as error:
            raise SystemExit(f'--resume: {error}')
    check_batch_sampler(cfg)
    return cfg


def check_training_parts(cfg, config):
    """A config without the parts training needs (a test-only one) is refused in one line
    rather than MMEngine's "`_train_loop` should not be None"."""
    missing = [key for key in ('train_dataloader', 'train_cfg', 'optim_wrapper')
               if not cfg.get(key)]
    if missing:
        raise SystemExit(
            f'{config}: cannot train: it sets no {", ".join(missing)} (a test-only config); '
            f'evaluate it with tools/test.py {config} [CHECKPOINT], or train a config that '
            'has them.')


def check_batch_sampler(cfg):
    """A batch-composing sampler (M-per-class, ...) must agree with the loader's batch size."""
    loader = cfg.get('train_dataloader') or {}
    sampler = loader.get('sampler') or {}
    if 'batch_size' in sampler and sampler['batch_size'] != loader.get('batch_size'):
        raise SystemExit(
            f'{cfg.filename}: train_dataloader.sampler.batch_size={sampler["batch_size"]} differs '
            f'from train_dataloader.batch_size={loader.get("batch_size")}; the sampler composes '
            'whole batches, so set both to the same value.')


def main(argv=None):
    args = parse_args(argv)
    relaunch('train', args, argv)
    cfg = build_cfg(args)
    from irtbox.apis import build_runner
    from irtbox.engine import NonFiniteLossError
    from irtbox.engine.runner import ResumeRefused
    from irtbox.engine.work_dir_lock import WorkDirLocked
    from irtbox.models.backbones import PretrainedWeightsUnavailable
    try:
        runner = build_runner(cfg)
    except PretrainedWeightsUnavailable as error:  # one line per rank, not a hub traceback
        raise SystemExit(f'{args.config}: {error}') from error
    try:
        runner.train()
    except NonFiniteLossError as err:  # a clear stop, not a traceback: the message says it all
        runner.logger.error(str(err))
        raise SystemExit(1) from err
    except (WorkDirLocked, ResumeRefused) as err:  # one line: what happened, what to do
        runner.logger.error(str(err))
        raise SystemExit(f'{args.config}: {err}') from err
