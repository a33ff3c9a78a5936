"""Check a prepared dataset before a long run: every file its annotation names exists, images
decode (a seeded sample, or all with --full, in parallel), and the counts per split are the
published ones. Prints a report (what is wrong, where, the fix), writes it as JSON with
--json, and exits with status 1 when the tree would give wrong numbers.

Examples:
  irtbox check sop --root data/sop
  irtbox check roxford5k --full --json roxford5k_check.json
"""
import json

from irtbox.cli import command_parser
from irtbox.datasets import dataset_spec, dataset_specs
from irtbox.ops.prepare import check_dataset, format_report
from irtbox.utils.checks import int_argument
from irtbox.utils.fileio import atomic_write_text, read_json

__all__ = ['parse_args', 'main']


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
    args = parse_args(argv)
    info = dataset_spec(args.name, preparable=True)
    expected = _read_counts(args.counts) if args.counts else None
    report = check_dataset(info, args.root or info.default_root, full=args.full,
                           sample=args.sample, seed=args.seed, workers=args.workers,
                           expected=expected)
    print(format_report(report))
    if args.json:
        atomic_write_text(args.json, json.dumps(report, indent=1))
    if not report['ok']:
        raise SystemExit(1)
    return report
