"""The cost of re-ranking (k-reciprocal, diffusion, SuperGlobal; irtbox.evaluation.functional)
beside the first search it follows, each step in its own process: wall and CPU seconds and the
extra peak resident memory of the call (VmHWM, irtbox/utils/memory.py).

  python tools/benchmarks/rerank_cost.py --db-size 5000 [--dim 2048 --queries 70]
  python tools/benchmarks/rerank_cost.py --db-size 1000000 --data-dir /big/disk/rerank

The data: --db-size synthetic class-structured unit rows (``make_retrieval_data`` of the
evaluation benchmark, written to a .npy in blocks and read memory-mapped, so nothing holds
N x D floats) and --queries queries, as ROxford + distractors at 2048-d. Steps, in order:
``search`` (the exact top 1000 of every query, blockwise over the memory map: what re-ranking
starts from), the database graphs (``graph k=20`` for k-reciprocal with each row's farthest,
``graph k=50`` for diffusion: computed once, saved), then each re-ranking on its paper's
shortlist (k-reciprocal 100, diffusion 1000, SuperGlobal 400) from the saved search and graph.
Prints a markdown table.
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
STEPS = ('search', 'graph k=20', 'graph k=50', 'kreciprocal', 'diffusion', 'superglobal')
BLOCK = 50_000


def generate(args):
    from bench_eval import make_retrieval_data
    db = np.lib.format.open_memmap(osp.join(args.data_dir, 'db.npy'), 'w+', np.float32,
                                   (args.db_size, args.dim))
    for start in range(0, args.db_size, BLOCK):
        rows = min(BLOCK, args.db_size - start)
        emb = make_retrieval_data(rows, args.dim, seed=start, spectrum=1.0)[0]
        db[start:start + rows] = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    db.flush()
    # Queries: noisy copies of database rows, so that each has true neighbours.
    rng = np.random.default_rng(0)
    q = db[np.sort(rng.choice(args.db_size, args.queries, replace=False))]
    q = q + 0.5 * rng.standard_normal(q.shape).astype(np.float32) / np.sqrt(args.dim)
    np.save(osp.join(args.data_dir, 'queries.npy'), q / np.linalg.norm(q, axis=1, keepdims=True))


def child(step, folder):
    from irtbox.evaluation.functional import (load_neighbour_graph, neighbour_graph, rerank,
                                              save_neighbour_graph)
    from irtbox.evaluation.functional.ranking import blockwise_topk
    from irtbox.utils.memory import peak_rss_mb, reset_peak
    db = np.load(osp.join(folder, 'db.npy'), mmap_mode='r')
    q = np.load(osp.join(folder, 'queries.npy'))
    path = lambda name: osp.join(folder, name)  # noqa: E731
    before = reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    if step == 'search':
        scores, ids = blockwise_topk(q, db, min(1000, len(db)))
        np.savez(path('search.npz'), scores=scores, ids=ids)
    elif step.startswith('graph'):
        k = int(step.split('=')[1])
        save_neighbour_graph(path(f'graph{k}.npz'), neighbour_graph(db, k, farthest=k == 20))
    else:
        first = np.load(path('search.npz'))
        shortlist = dict(kreciprocal=100, diffusion=1000, superglobal=400)[step]
        graph = dict(kreciprocal='graph20.npz', diffusion='graph50.npz').get(step)
        rerank(dict(type=step), q, db, first['ids'][:, :shortlist],
               first['scores'][:, :shortlist], graph and load_neighbour_graph(path(graph)))
    print(json.dumps(dict(seconds=time.perf_counter() - started,
                          cpu_seconds=time.process_time() - cpu,
                          extra_peak_mb=peak_rss_mb() - before)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--db-size', type=int, default=5000)
    parser.add_argument('--dim', type=int, default=2048)
    parser.add_argument('--queries', type=int, default=70)
    parser.add_argument('--data-dir', default=None, help='default: a temporary folder')
    parser.add_argument('--child', default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        args.data_dir = args.data_dir or tmp
        os.makedirs(args.data_dir, exist_ok=True)
        generate(args)
        print(f'{args.queries} queries, {args.db_size:,} x {args.dim} database, '
              f'{os.cpu_count()} CPUs\n')
        print('| step | wall s | CPU s | extra peak RSS (MB) |\n|---|---|---|---|')
        for step in STEPS:
            out = subprocess.run([sys.executable, osp.abspath(__file__), '--child', step,
                                  '--data-dir', args.data_dir], check=True,
                                 capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f'| {step} | {r["seconds"]:.2f} | {r["cpu_seconds"]:.2f} | '
                  f'{r["extra_peak_mb"]:.0f} |', flush=True)


if __name__ == '__main__':
    main()
