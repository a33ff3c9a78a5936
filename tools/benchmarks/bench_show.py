"""What ``tools/test.py --show-dir`` adds to an evaluation: result grids, the results browser and
failures.csv for a growing number of drawn queries, on a synthetic labelled test set.

  python tools/benchmarks/bench_show.py [--n 10000] [--dim 384] [--num 100 300] [--k 8]

The test set: --n unit vectors, 5 per class around random class centres with enough noise that
some queries fail, and one small PNG per sample (written once to a temporary folder, not
timed); leave-one-out, every sample is a query. For each --num: the wall time of
``show_results`` (screening a pool of queries for failures, ranking the drawn ones in full,
drawing the grids, thumbnails, index.html, failures.csv) and the marginal seconds per hundred
queries between consecutive --num values. Prints a markdown table.
"""
import argparse
import os.path as osp
import tempfile
import time

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--n', type=int, default=10000, help='samples (all queries)')
    parser.add_argument('--dim', type=int, default=384, help='embedding size')
    parser.add_argument('--num', type=int, nargs='+', default=[100, 300],
                        help='queries drawn, one run each')
    parser.add_argument('--k', type=int, default=8, help='results per query')
    args = parser.parse_args(argv)
    from PIL import Image

    from irtbox.visualization import show_results
    rng = np.random.default_rng(0)
    labels = np.arange(args.n) // 5
    centres = rng.normal(size=(labels[-1] + 1, args.dim))
    emb = (centres[labels] + 2.5 * rng.normal(size=(args.n, args.dim))).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [osp.join(tmp, f'{i}.png') for i in range(args.n)]
        for path in paths:
            Image.new('RGB', (64, 64), tuple(int(c) for c in rng.integers(0, 256, 3))).save(path)
        print(f'| queries drawn | wall (s) | marginal s / 100 queries |   ({args.n} queries x '
              f'{args.n} gallery, D = {args.dim}, k = {args.k})\n|---|---|---|')
        last = None
        for num in sorted(args.num):
            started = time.perf_counter()
            show_results(osp.join(tmp, f'show{num}'), emb, paths, labels=labels, num=num,
                         k=args.k, progress=False)
            wall = time.perf_counter() - started
            marginal = '' if last is None else f'{100 * (wall - last[1]) / (num - last[0]):.2f}'
            print(f'| {num} | {wall:.2f} | {marginal} |', flush=True)
            last = (num, wall)


if __name__ == '__main__':
    main()
