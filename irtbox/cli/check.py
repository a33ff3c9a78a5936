"""Check a prepared dataset before a long run: every file its annotation names exists, images
decode (a seeded sample, or all with --full, in parallel), and the counts per split are the
published ones. Prints a report (what is wrong, where, the fix), writes it as JSON with
--json, and exits with status 1 when the tree would give wrong numbers.

Examples:
  irtbox check sop --root data/sop
  irtbox check roxford5k --full --json roxford5k_check.json
  irtbox check overlap TRAIN_CONFIG TEST_CONFIG --checkpoint CKPT   (irtbox check overlap --help)
"""
import json
import os.path as osp
import sys

from irtbox.cli import add_cfg_options, checkpoint_argument, command_parser
from irtbox.cli.prepare import prepare_command
from irtbox.datasets import dataset_spec, dataset_specs
from irtbox.ops.prepare import check_dataset, format_report
from irtbox.utils.checks import int_argument
from irtbox.utils.fileio import atomic_write_text, read_json

__all__ = ['parse_args', 'parse_overlap_args', 'main']

OVERLAP_DOC = """Train/test overlap: the test images (every query and database image of TEST_CONFIG's
test sets) with a near copy among TRAIN_CONFIG's training images, by the embeddings of
TEST_CONFIG's model with --checkpoint, both through TEST_CONFIG's test pipeline. Each test
image's --k nearest training images are searched exactly, the training images embedded and
searched --block-size at a time (never all in memory). The pairs of cosine similarity
>= --threshold go to the report in --out-dir: pairs.csv, summary.json (counts per test set,
test class and training class), histogram.png (each test image's best similarity),
top_pairs.png (the --top most similar pairs) and exclude_classes.json, the training classes
of the pairs, which a training config leaves out with
  --cfg-options train_dataloader.dataset.exclude_classes=OUT_DIR/exclude_classes.json
Choose --threshold from histogram.png and top_pairs.png: unrelated images form the bulk,
copies and near copies a separate bump near 1 (docs/datasets.md, "Train/test overlap").

Example:
  irtbox check overlap configs/dtop/dtop_r50-vit-b_8xb8-30e_gldv2clean.py \\
      configs/dtop/dtop_r50-vit-b_8xb8-30e_gldv2clean.py --checkpoint work_dirs/dtop/iter_N.pth
"""


def parse_args(argv=None):
    parser = command_parser(__doc__)
    names = list(dataset_specs(preparable=True))
    parser.add_argument('name', metavar='NAME', choices=names,
                        help=f'the dataset, one of {", ".join(names)}')
    parser.add_argument('--root', help='the dataset folder (default: data/<name>)')
    parser.add_argument('--full', action='store_true', help='decode every image')
    parser.add_argument('--sample', type=int_argument(0), default=1000,
                        help='images decoded per split without --full (default 1000)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the sample')
    parser.add_argument('--workers', type=int_argument(1), default=None,
                        help='decoding threads (default: the CPU count)')
    parser.add_argument('--counts', metavar='FILE.json', help='expected counts per split '
                        'instead of the published ones, e.g. {"train": {"images": 100}}')
    parser.add_argument('--json', metavar='FILE', help='also write the report as JSON')
    return parser.parse_args(argv)


def parse_overlap_args(argv=None):
    """The command line of ``irtbox check overlap``."""
    parser = command_parser('Check a training set against a test set for shared images.',
                            OVERLAP_DOC, prog='irtbox check overlap')
    parser.add_argument('train_config', metavar='TRAIN_CONFIG',
                        help='the config whose train_dataloader dataset is the training set')
    parser.add_argument('test_config', metavar='TEST_CONFIG',
                        help='the config whose test_dataloader(s) hold the test sets, and whose '
                        'model embeds the images')
    parser.add_argument('--checkpoint', type=checkpoint_argument, required=True,
                        metavar='CKPT', help='the model\'s weights, a file or URL ("none": the '
                        'config\'s own)')
    parser.add_argument('--out-dir', help='the report folder (default: '
                        'work_dirs/<TEST_CONFIG name>/overlap_<TRAIN_CONFIG name>)')
    parser.add_argument('--threshold', type=float, default=0.9,
                        help='cosine similarity from which a pair is reported (default 0.9)')
    parser.add_argument('--k', type=int_argument(1), default=5,
                        help='training neighbours per test image (default 5)')
    parser.add_argument('--top', type=int_argument(1), default=50,
                        help='pairs drawn in top_pairs.png (default 50)')
    parser.add_argument('--batch-size', type=int_argument(1), default=32,
                        help='images per forward pass')
    parser.add_argument('--num-workers', type=int_argument(0), default=2,
                        help='image decoding processes')
    parser.add_argument('--block-size', type=int_argument(1), default=8192,
                        help='training images embedded and searched at a time (default 8192)')
    parser.add_argument('--device', help='cpu or cuda (default: cuda if available)')
    add_cfg_options(parser, 'override entries of both configs')
    return parser.parse_args(argv)


def overlap(argv=None) -> dict:
    """``irtbox check overlap``: writes the report, prints its summary, returns it."""
    from irtbox.ops.overlap import check_overlap
    args = parse_overlap_args(argv)
    out_dir = args.out_dir or osp.join(
        'work_dirs', osp.splitext(osp.basename(args.test_config))[0],
        'overlap_' + osp.splitext(osp.basename(args.train_config))[0])
    summary = check_overlap(args.train_config, args.test_config, args.checkpoint, out_dir,
                            threshold=args.threshold, k=args.k, top=args.top,
                            batch_size=args.batch_size, num_workers=args.num_workers,
                            block_size=args.block_size, device=args.device,
                            cfg_options=args.cfg_options)
    print(f'{summary["pairs"]} pairs of similarity >= {args.threshold:g}: '
          f'{summary["test_images_overlapping"]} of {summary["test_images"]} test images, '
          f'{summary["train_classes_overlapping"]} training classes (exclude_classes.json); '
          f'report in {out_dir}')
    return summary


def _read_counts(path: str) -> dict:
    try:
        counts = read_json(path)
    except (OSError, ValueError) as err:
        raise SystemExit(f'--counts {path}: not a readable JSON file ({err})') from err
    if not isinstance(counts, dict) or not all(
            isinstance(v, dict) and all(isinstance(n, int) for n in v.values())
            for v in counts.values()):
        raise SystemExit(f'--counts {path}: expected {{split: {{"images": int, ...}}}}, got '
                         f'{str(counts)[:80]}')
    return counts


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['overlap']:
        return overlap(argv[1:])
    args = parse_args(argv)
    info = dataset_spec(args.name, preparable=True)
    expected = _read_counts(args.counts) if args.counts else None
    root = args.root or info.default_root
    report = check_dataset(info, root, full=args.full, sample=args.sample, seed=args.seed,
                           workers=args.workers, expected=expected,
                           prepare_hint=f'run `{prepare_command(info.name, root)}`')
    print(format_report(report))
    if args.json:
        atomic_write_text(args.json, json.dumps(report, indent=1))
    if not report['ok']:
        raise SystemExit(1)
    return report
