"""The cost of re-ranking (k-reciprocal, diffusion, SuperGlobal; irtbox.evaluation.functional)
beside the first search it follows, each step in its own process: wall and CPU seconds, the
extra peak resident memory of the call (VmHWM, irtbox/utils/memory.py) and the wall time as a
multiple of the first search's (the floor).

  python tools/benchmarks/rerank_cost.py --db-size 5000 [--dim 2048 --queries 70]
  python tools/benchmarks/rerank_cost.py --db-size 1000000 --dim 128 --graph ivf --threads 1

The data: --db-size synthetic class-structured unit rows (``make_retrieval_data`` of the
evaluation benchmark, written to a .npy in blocks and read memory-mapped, so nothing holds
N x D floats) and --queries queries, as ROxford + distractors. Steps, in order: ``search`` (the
exact top 1000 of every query, blockwise over the memory map: what re-ranking starts from), the
database graph (``graph``: k = 50 neighbours and each row's farthest cosine, exact or --graph
ivf with --nlist / --nprobe; computed once, saved; k-reciprocal's k1 = 20 reads its first 20,
the same as a 20-neighbour graph), then each re-ranking on its paper's shortlist (k-reciprocal
100, diffusion 1000, SuperGlobal 400) from the saved search and graph. Prints a markdown table,
then the graph's neighbour recall against exact search on 100 evenly spaced rows.
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
STEPS = ('search', 'graph', 'kreciprocal', 'diffusion', 'superglobal')
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


def child(step, args):
    import torch
    from irtbox.evaluation.functional import (load_neighbour_graph, neighbour_graph, rerank,
                                              save_neighbour_graph)
    from irtbox.evaluation.functional.ranking import blockwise_topk
    from irtbox.evaluation.neighbours.faiss_index import import_faiss
    from irtbox.utils.memory import peak_rss_mb, reset_peak
    if args.threads:
        torch.set_num_threads(args.threads)
        import_faiss().omp_set_num_threads(args.threads)
    db = np.load(osp.join(args.data_dir, 'db.npy'), mmap_mode='r')
    q = np.load(osp.join(args.data_dir, 'queries.npy'))
    path = lambda name: osp.join(args.data_dir, name)  # noqa: E731
    before = reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    extra = {}
    if step == 'search':
        scores, ids = blockwise_topk(q, db, min(1000, len(db)))
        np.savez(path('search.npz'), scores=scores, ids=ids)
    elif step == 'graph':
        options = dict(method=args.graph, nlist=args.nlist, nprobe=args.nprobe) \
            if args.graph == 'ivf' else {}
        graph = neighbour_graph(db, 50, farthest=True, **options)
        save_neighbour_graph(path('graph.npz'), graph)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        rows = np.linspace(0, len(db) - 1, 100).astype(np.int64)
        exact = blockwise_topk(np.asarray(db[rows]), db, 50, exclude=rows)[1]
        extra = dict(seconds=seconds, cpu_seconds=cpu_seconds, recall=float(np.mean(
            [len(set(a) & set(b)) / 50 for a, b in zip(exact, graph.ids[rows])])))
    else:
        first = np.load(path('search.npz'))
        shortlist = dict(kreciprocal=100, diffusion=1000, superglobal=400)[step]
        rerank(dict(type=step), q, db, first['ids'][:, :shortlist],
               first['scores'][:, :shortlist],
               None if step == 'superglobal' else load_neighbour_graph(path('graph.npz')))
    print(json.dumps(dict(dict(seconds=time.perf_counter() - started,
                               cpu_seconds=time.process_time() - cpu), **extra,
                          extra_peak_mb=peak_rss_mb() - before)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--db-size', type=int, default=5000)
    parser.add_argument('--dim', type=int, default=2048)
    parser.add_argument('--queries', type=int, default=70)
    parser.add_argument('--data-dir', default=None, help='default: a temporary folder')
    parser.add_argument('--graph', choices=('exact', 'ivf'), default='exact')
    parser.add_argument('--nlist', type=int, default=None, help="--graph ivf's (default √N)")
    parser.add_argument('--nprobe', type=int, default=16, help="--graph ivf's (default 16)")
    parser.add_argument('--threads', type=int, default=0,
                        help="torch's and faiss's threads in each step (0: their default)")
    parser.add_argument('--child', default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args)
    with tempfile.TemporaryDirectory() as tmp:
        args.data_dir = args.data_dir or tmp
        os.makedirs(args.data_dir, exist_ok=True)
        generate(args)
        print(f'{args.queries} queries, {args.db_size:,} x {args.dim} database, '
              f'{os.cpu_count()} CPUs, {args.threads or "default"} thread(s), graph '
              f'{args.graph}' + (f' (nlist {args.nlist or "√N"}, nprobe {args.nprobe})'
                                  if args.graph == 'ivf' else '') + '\n')
        print('| step | wall s | CPU s | extra peak RSS (MB) | wall / search |\n'
              '|---|---|---|---|---|')
        floor, recall = None, None
        for step in STEPS:
            out = subprocess.run([sys.executable, osp.abspath(__file__), '--child', step] +
                                 [f'--{key.replace("_", "-")}={value}' for key, value in
                                  vars(args).items() if key != 'child' and value is not None],
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            floor = floor or r['seconds']
            recall = r.get('recall', recall)
            print(f'| {step} | {r["seconds"]:.2f} | {r["cpu_seconds"]:.2f} | '
                  f'{r["extra_peak_mb"]:.0f} | {r["seconds"] / floor:.1f} |', flush=True)
        print(f'\ngraph recall@50 against exact search (100 rows): {recall:.3f}')


if __name__ == '__main__':
    main()
