"""Result grids, an HTML results browser and failures.csv from a saved test result, no model needed.

RESULTS is the embeddings file of ``tools/test.py CONFIG CKPT --out results.npz`` (embeddings,
labels, query flags and each sample's image path relative to the stored data root; --set NAME
picks a test set of a multi-dataset result). Writes to --out-dir the same as
``tools/test.py --show-dir``:

- grids/query_<i>.png: the query (blue frame) and its top-k, framed green = correct,
  red = wrong, grey = junk, each with its rank and cosine similarity;
- index.html: one row per query, sortable by AP, with a "failures only" filter; open it
  from the file system (no server, nothing downloaded);
- failures.csv: the shown queries (with --worst: all queries), worst AP first, with R, the
  rank of the first correct result and the wrong classes ranked before it.

Examples:
  python tools/test.py CONFIG CKPT --out work_dirs/res/results.npz
  python tools/analysis_tools/browse_results.py work_dirs/res/results.npz --out-dir work_dirs/show
  # 200 queries, 10 results each, another sample; data moved since the test
  python tools/analysis_tools/browse_results.py results.npz --out-dir show --show-num 200 \\
      --topk 10 --seed 1 --data-root /new/place/sop
  # the 100 worst queries of the whole test set; failures.csv lists every query, worst first
  python tools/analysis_tools/browse_results.py results.npz --out-dir worst --worst 100
  # revisited Oxford / Paris (no labels: correct / junk from the ground truth)
  python tools/analysis_tools/browse_results.py roxford.npz --out-dir show \\
      --gnd data/roxford5k/gnd_roxford5k.pkl --protocol medium
"""
import os.path as osp

from irtbox.cli import RESULTS_FLAGS, command_parser, worded
from irtbox.utils.checks import int_argument

__all__ = ['parse_args', 'main']

def parse_args(argv=None):
    """The command line of ``browse_results.py``."""
    parser = command_parser(
        'Result grids, index.html and failures.csv from a tools/test.py --out .npz.', __doc__)
    parser.add_argument('results', help='the .npz of tools/test.py --out')
    parser.add_argument('--out-dir', required=True, help='where grids/, index.html and '
                        'failures.csv go')
    parser.add_argument('--show-num', type=int_argument(1), default=50,
                        help='queries shown (default 50; '
                        'up to half of them top-1 failures)')
    parser.add_argument('--topk', type=int_argument(1), default=8,
                        help='results per query (default 8)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the query sample')
    parser.add_argument('--worst', type=int_argument(0), default=0,
                        help='show the N queries with the lowest AP of the whole test set '
                        'instead of a sample (ranks every query in full, like map@all; '
                        'failures.csv then lists all queries)')
    parser.add_argument('--set', default=None, metavar='NAME',
                        help="the test set of a multi-dataset result, e.g. '1' (default: the "
                        "file's only or main set)")
    parser.add_argument('--data-root', help='the data root now, if the images moved since the '
                        'test (replaces the stored one)')
    parser.add_argument('--gnd', help='revisited ground truth (gnd_roxford5k.pkl / '
                        'gnd_rparis6k.pkl) for a result without labels')
    parser.add_argument('--protocol', default='medium', choices=['easy', 'medium', 'hard'],
                        help='the --gnd protocol (default medium)')
    return parser.parse_args(argv)


def main(argv=None):
    """Draw the grids, index.html and failures.csv; returns the drawn queries' records."""
    args = parse_args(argv)
    from irtbox.visualization import browse_results
    try:
        records = browse_results(args.results, args.out_dir, name=args.set,
                                 data_root=args.data_root, gnd_file=args.gnd,
                                 protocol=args.protocol, num=args.show_num, k=args.topk,
                                 seed=args.seed, worst=args.worst)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(worded(error, RESULTS_FLAGS)) from error
    print(f"{len(records)} queries drawn: open {osp.join(args.out_dir, 'index.html')}; "
          f"worst queries in {osp.join(args.out_dir, 'failures.csv')}")
    return records
