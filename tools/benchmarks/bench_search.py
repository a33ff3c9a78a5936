"""Search latency of one query on a synthetic collection: ImageSearcher (exact and IVF) against
bare faiss doing the same search, each contender in its own process.

  python tools/benchmarks/bench_search.py [--n 100000] [--dim 384] [--queries 500] [--k 10]

For each contender: the time to build the index, p50 / p99 of single-query latency (one
query per call, as a web request makes it), peak resident memory of the process, the ratio
of its p50 to the bare-faiss p50 of the same index type, and for IVF the recall@10 against
exact search, held out: each query's own row left out (ImageSearcher.recall_vs_exact).
The collection: --n unit vectors around 1,000 random centres (structure that IVF can use).
Prints a markdown table.
"""
import argparse
import json
import os.path as osp
import subprocess
import sys
import time

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

from irtbox.utils.memory import peak_rss_mb


def collection(n, dim, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dim)).astype(np.float32)
    x = centres[rng.integers(0, 1000, n)] + 0.5 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def run_contender(name, factory, n, dim, queries, k, nprobe):
    x = collection(n, dim)
    qs = x[np.random.default_rng(1).choice(n, queries, replace=False)]
    import faiss
    if name == 'irtbox':
        from irtbox.search import ImageSearcher  # imports torch: counted in peak RSS, not time
    started = time.perf_counter()
    if name == 'faiss':
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        index.train(x)
        index.add(x)
        if factory != 'Flat':
            faiss.ParameterSpace().set_index_parameter(index, 'nprobe', nprobe)

        def search(q):
            return index.search(q[None], k)
    else:
        searcher = ImageSearcher(factory=factory, device='cpu',
                                 nprobe=nprobe if factory != 'Flat' else None)
        searcher.add(x)

        def search(q):
            return searcher.search(q, k=k)
    build = time.perf_counter() - started
    for q in qs[:20]:  # warm-up
        search(q)
    times = []
    for q in qs:
        t = time.perf_counter()
        search(q)
        times.append(time.perf_counter() - t)
    recall = None
    if name == 'irtbox' and factory != 'Flat':
        recall = searcher.recall_vs_exact(k=10, num_queries=1000)
    return dict(build_s=build, p50_ms=1000 * float(np.percentile(times, 50)),
                p99_ms=1000 * float(np.percentile(times, 99)), recall=recall,
                peak_mb=peak_rss_mb())


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--n', type=int, default=100000)
    parser.add_argument('--dim', type=int, default=384)
    parser.add_argument('--queries', type=int, default=500)
    parser.add_argument('--k', type=int, default=10)
    parser.add_argument('--ivf', default='IVF1024,Flat')
    parser.add_argument('--nprobe', type=int, default=16)
    parser.add_argument('--one', nargs=2, help=argparse.SUPPRESS)  # run one contender
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_contender(args.one[0], args.one[1], args.n, args.dim, args.queries,
                                       args.k, args.nprobe)))
        return
    rows = []
    for factory in ('Flat', args.ivf):
        for name in ('faiss', 'irtbox'):
            out = subprocess.run(
                [sys.executable, __file__, '--one', name, factory, '--n', str(args.n), '--dim',
                 str(args.dim), '--queries', str(args.queries), '--k', str(args.k),
                 '--nprobe', str(args.nprobe)], check=True, capture_output=True, text=True)
            rows.append((name, factory, json.loads(out.stdout.strip().splitlines()[-1])))
    print(f'{args.n} x {args.dim}, {args.queries} single queries, k={args.k}, '
          f'nprobe={args.nprobe}\n')
    print('| contender | index | build (s) | p50 (ms) | p99 (ms) | p50 / bare faiss | '
          'peak RSS (MB) | recall@10 vs exact |')
    print('|---|---|---|---|---|---|---|---|')
    floor = {f: r['p50_ms'] for n, f, r in rows if n == 'faiss'}
    for name, factory, r in rows:
        recall = '' if r['recall'] is None else f'{r["recall"]:.3f}'
        contender = 'bare faiss' if name == 'faiss' else 'ImageSearcher'
        print(f'| {contender} | {factory} | {r["build_s"]:.2f} | {r["p50_ms"]:.3f} | '
              f'{r["p99_ms"]:.3f} | {r["p50_ms"] / floor[factory]:.2f} | {r["peak_mb"]:.0f} | '
              f'{recall} |')


if __name__ == '__main__':
    main()
