"""Evaluate a retrieval model: extract test-set embeddings and compute the config's metrics.

Examples:
  python tools/test.py CONFIG CKPT
  python tools/test.py CONFIG CKPT --out results.npz     # embeddings, image ids, labels,
                                                         # query flags, metrics, model identity
                                                         # (metrics also in results.json)
  python tools/test.py CONFIG CKPT --out results.json    # metrics only: name -> value
  python tools/test.py CONFIG CKPT --show-dir work_dirs/show   # result grids, index.html
                                                         # (open it in a browser), failures.csv
  python tools/test.py CONFIG                            # no checkpoint: the config's own weights
                                                         # (e.g. IRT_O, timm ImageNet weights)
  python tools/test.py CONFIG CKPT --nproc 8            # 8 processes (= tools/dist_test.sh CONFIG CKPT 8)

Read results.npz back with ``irtbox.structures.load_embeddings('results.npz')`` (one set per
test set: ``name='0'``, ``'1'``, ... for a multi-dataset config).
"""
import os

from irtbox.cli import add_cfg_options, add_verbose_argument, command_parser, worded
from irtbox.cli.launch import add_launch_arguments, relaunch
from irtbox.cli.prechecks import check_inputs
from irtbox.utils.checks import int_argument

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    """The command line of ``tools/test.py``."""
    parser = command_parser('Test an irtbox retrieval model.', __doc__)
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', nargs='?', default=None,
                        help='checkpoint file or URL (default: none, the weights the config builds)')
    parser.add_argument('--work-dir', help='where logs go (default: ./work_dirs/<config name>)')
    parser.add_argument('--out', help='a .npz file: write the embeddings file there (embeddings, '
                        'image ids, labels, query flags, metrics, model identity; metrics also '
                        'to the same name with .json); a .json file: write only the metrics '
                        '(name -> value)')
    parser.add_argument('--show-dir', help='draw a sample of queries with their top-k there: '
                        'grids/*.png (green = correct, red = wrong, grey = junk), index.html '
                        '(a results browser; open it from the file system) and failures.csv')
    parser.add_argument('--show-num', type=int_argument(1), default=50,
                        help='queries drawn with --show-dir (default 50; up to half of them '
                        'top-1 failures, the sample fixed by --show-seed)')
    parser.add_argument('--show-topk', type=int_argument(1), default=8,
                        help='results per query drawn')
    parser.add_argument('--show-seed', type=int, default=0, help='seed of the query sample')
    add_cfg_options(parser)
    add_verbose_argument(parser)
    add_launch_arguments(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.out and not args.out.endswith(('.npz', '.json')):
        parser.error(f'--out must name a .npz or .json file, got {args.out}')
    return args


def main(argv=None):
    """Run ``tools/test.py``; returns the metrics."""
    args = parse_args(argv)
    # Before the environment and config dump, and under --nproc before any rank starts.
    check_inputs(args.config, args.cfg_options, ('test_dataloader', ), args.checkpoint,
                 outputs={'--out': (args.out, False), '--show-dir': (args.show_dir, True)})
    relaunch('test', args, argv)
    from irtbox.apis.tester import EvaluationSetupError, run_test
    from irtbox.cli.header import RunHeader
    from irtbox.utils.config import CustomImportError
    try:
        return run_test(args.config, args.checkpoint, cfg_options=args.cfg_options,
                        work_dir=args.work_dir, launcher=args.launcher, out=args.out,
                        show_dir=args.show_dir, show_num=args.show_num,
                        show_topk=args.show_topk, show_seed=args.show_seed,
                        hooks=[RunHeader(args.config)])
    except (EvaluationSetupError, CustomImportError) as error:
        raise SystemExit(worded(error)) from error
