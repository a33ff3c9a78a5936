"""Draw the figures of a sweep (Berton, Musgrave & Masone, Figures 4-10) from its summary table.

What the figures show: irtbox/ops/sweeps/figures.py (printed below by --help).

Example:
  python tools/analysis_tools/plot_sweep.py work_dirs/sweep/summary.csv SPEC --out-dir figs
"""
import os.path as osp

from irtbox.cli import command_parser, module_doc

__all__ = ['main']


def main(argv=None):
    parser = command_parser(__doc__, module_doc('irtbox.ops.sweeps.figures'))
    parser.add_argument('summary', help='summary.csv written by tools/sweep.py')
    parser.add_argument('spec', help='the grid spec of the sweep (factor values, log_x, metrics)')
    parser.add_argument('--out-dir', help='where the PNGs go (default: next to the summary)')
    parser.add_argument('--band', choices=['minmax', 'std'], default='minmax')
    args = parser.parse_args(argv)
    from irtbox.ops.sweeps import load_spec, plot_all, read_summary  # torch: after --help
    if not osp.isfile(args.summary):
        raise SystemExit(f'summary table not found: {args.summary}')
    try:
        spec = load_spec(args.spec)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error))
    paths = plot_all(read_summary(args.summary), spec,
                     args.out_dir or osp.dirname(osp.abspath(args.summary)), band=args.band)
    for p in paths:
        print(p)
    return paths
