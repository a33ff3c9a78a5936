"""Draw the figures of a sweep (Berton, Musgrave & Masone, Figures 4-10) from its summary table.

One PNG per (factor, metric), one panel per dataset: the metric against the
factor's values, one line per loss (solid: contrastive family, dotted:
classification family) at the mean over seeds, a shaded band (min-max over
seeds, or mean +- std), and the off-the-shelf model as a grey horizontal line.
Numeric factor values get a numeric axis (logarithmic with the factor's
``log_x``, or when all values are positive and span >= 100x); other values
(e.g. 'raw' next to dimensions) are placed evenly in the spec's order.
The file is fig_<factor>_<metric>.png, or fig<N>_<factor>_<metric>.png titled
'Fig. N: <factor>' when the factor has `figure=N`; the x axis is labelled with
the factor's `label` (default: its name).

The library behind this CLI is irtbox/sweeps/figures.py.

Example:
  python tools/analysis_tools/plot_sweep.py work_dirs/sweep/summary.csv SPEC --out-dir figs
"""
import argparse
import os.path as osp

from irtbox.sweeps import load_spec, plot_all, read_summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('summary', help='summary.csv written by tools/sweep.py')
    parser.add_argument('spec', help='the grid spec of the sweep (factor values, log_x, metrics)')
    parser.add_argument('--out-dir', help='where the PNGs go (default: next to the summary)')
    parser.add_argument('--band', choices=['minmax', 'std'], default='minmax')
    args = parser.parse_args(argv)
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


if __name__ == '__main__':
    main()
