"""Evaluate a retrieval model: extract test-set embeddings and compute the config's metrics.

Examples:
  python tools/test.py CONFIG CKPT
  python tools/test.py CONFIG CKPT --out results.npz     # embeddings, labels, ids, metrics
                                                         # (metrics also in results.json)
  python tools/test.py CONFIG CKPT --out results.json    # metrics only: name -> value
  python tools/test.py CONFIG                            # no checkpoint: the config's own weights
                                                         # (e.g. IRT_O, timm ImageNet weights)
  tools/dist_test.sh CONFIG CKPT 8
"""
import argparse
import json
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from irtbox.utils.config import DictAction, load_config  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Test an irtbox retrieval model.', epilog=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', nargs='?', default=None,
                        help='checkpoint file or URL (default: none, the weights the config builds)')
    parser.add_argument('--work-dir', help='where logs go (default: ./work_dirs/<config name>)')
    parser.add_argument('--out', help='a .npz file: write embeddings, labels, sample ids, query '
                        'flags and metrics there (metrics also to the same name with .json); '
                        'a .json file: write only the metrics (name -> value)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, metavar='KEY=VALUE',
                        help='override config entries')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.out and not args.out.endswith(('.npz', '.json')):
        parser.error(f'--out must name a .npz or .json file, got {args.out}')
    return args


def write_outputs(path: str, metrics: dict, outputs: dict) -> None:
    """Writes the metrics to ``path`` with a .json suffix; for a .npz ``path`` also the arrays
    of ``outputs`` plus ``metrics/<name>`` to ``path``."""
    import numpy as np
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    if path.endswith('.npz'):
        arrays = {k: np.asarray(v) for k, v in (outputs or {}).items()}
        arrays.update({f'metrics/{k}': np.asarray(v) for k, v in metrics.items()})
        np.savez(path, **arrays)
    with open(osp.splitext(path)[0] + '.json', 'w') as f:
        json.dump({k: float(v) for k, v in metrics.items()}, f, indent=2)


def metric_outputs(runner) -> dict:
    """The arrays the test metrics kept (embeddings, labels, ...), by name: '<i>/' in front
    for test set i of a multi-dataset loop, '<tag>/' for a second metric of one test set
    whose names would collide (its ``tag``, else 'metric<j>')."""
    outputs = {}
    evaluators = getattr(runner.test_loop, 'evaluators', [runner.test_evaluator])
    for index, evaluator in enumerate(evaluators):
        # Several test sets (a multi-dataset loop): their arrays get a '<index>/' prefix.
        prefix = f'{index}/' if len(evaluators) > 1 else ''
        for j, metric in enumerate(evaluator.metrics):
            arrays = getattr(metric, 'last_outputs', None) or {}
            # Two metrics of one test set (e.g. with and without whitening) both keep
            # 'embeddings': the later one's go under its tag instead of replacing the first's.
            tag = ''
            if any(prefix + k in outputs for k in arrays):
                tag = (getattr(metric, 'tag', None) or f'metric{j}') + '/'
            outputs.update({prefix + tag + k: v for k, v in arrays.items()})
    return outputs


def main(argv=None):
    args = parse_args(argv)
    from mmengine.dist import get_rank

    from irtbox.engine import IrtboxRunner
    from irtbox.utils import register_safe_globals
    from irtbox.utils.dist import adapt_cfg_to_device, finish_distributed, init_distributed
    cfg = load_config(args.config, args.cfg_options)
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    if args.checkpoint is not None:
        if not osp.isfile(args.checkpoint) and not args.checkpoint.startswith(('http://', 'https://')):
            raise SystemExit(f'checkpoint not found: {args.checkpoint}')
        cfg.load_from = args.checkpoint
    # Testing needs none of the training parts (and a config may leave them half-set).
    for key in ('train_dataloader', 'train_cfg', 'optim_wrapper', 'param_scheduler'):
        cfg[key] = None
    for key in ('test_dataloader', 'test_evaluator'):
        if cfg.get(key) is None:
            raise SystemExit(f'{args.config} has no {key}; tools/test.py needs one.')
    if args.launcher != 'none':
        adapt_cfg_to_device(cfg)
    register_safe_globals()
    if args.launcher != 'none':
        init_distributed(args.launcher)
    runner = IrtboxRunner.from_cfg(cfg)
    metrics = runner.test()
    if args.out and get_rank() == 0:
        outputs = metric_outputs(runner) if args.out.endswith('.npz') else {}
        write_outputs(args.out, metrics, outputs)
        runner.logger.info(f'results written to {args.out}')
    finish_distributed()
    return metrics


if __name__ == '__main__':
    main()
