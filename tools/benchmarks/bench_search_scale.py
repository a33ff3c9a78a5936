"""A big collection indexed under a memory budget: ``build_index_from_features`` (what
``tools/search.py build --from-features DIR INDEX --max-index-memory SIZE`` runs) on an
extraction's shards, against bare faiss building the same index, each in its own process.

  python tools/benchmarks/bench_search_scale.py --n 1000000 --dim 384 --budgets 4G 512M \\
      --data-dir /big/disk/bench_search_scale [--keep-data]

The data: an extraction folder (``shards.json`` + ``shards/shard_*.npz``, as tools/extract.py
writes it, never merged) of shards of 1M class-structured embeddings, each shard
``make_retrieval_data`` of the evaluation benchmark (``--spectrum 1.0 --noise 0.35``: a
trained model's power-law spectrum); 1,000 held-out queries (drawn with the shards, not
indexed) and their exact top 10, computed shard by shard. Nothing holds all N x D floats.

For each budget: ``irtbox`` builds from the shards (the index it chooses; build time and peak
RSS of the build process), then a fresh process loads the index (ImageSearcher.load, IVF
lists memory-mapped) and measures recall@10 of the held-out queries against exact search and
the p50 / p99 of ``ImageSearcher.search`` of one query at k=10 on one thread (200 queries),
re-ranking from the index folder's rows as the build chose. It does so twice: with the page
cache as the build left it (``warm``), then in another fresh process after the index
folder's files were dropped from the page cache (``cold``: posix_fadvise DONTNEED, as after
a reboot; the timed queries come first, so every list and row they touch is read from disk).
``faiss`` (the floor) builds the same factory string on the same number of training vectors,
adding shard by shard, with the nprobe irtbox chose, and is measured the same way on its
in-memory index. The floor's build time is its training and adding only; irtbox's build also
reads and normalises the rows into the index folder, computes exact top 10 for its recall
check, picks nprobe, times queries and saves (its ``stages``, printed with each row): the
table compares train + add with train + add.
The data is deleted at the end unless --keep-data. Prints a markdown table.
"""
import argparse
import glob
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
SHARD_ROWS = 1_000_000
QUERIES = 1000
LATENCY_QUERIES = 200
K = 10


def generate(args):
    """The extraction folder, the held-out queries and their exact top 10."""
    from bench_eval import make_retrieval_data

    from irtbox.structures.embeddings_file import EmbeddingSet, save_embeddings
    from irtbox.utils.fileio import atomic_write_text
    out = osp.join(args.data_dir, 'extract')
    os.makedirs(osp.join(out, 'shards'), exist_ok=True)
    count = -(-args.n // SHARD_ROWS)
    identity = dict(config=CONFIG, checkpoint=None, weights_sha256='synthetic',
                    preprocessing_sha256='synthetic', embedding_dim=args.dim, normalize=True)
    atomic_write_text(osp.join(out, 'shards.json'),
                      json.dumps(dict(images=args.n, shard_size=SHARD_ROWS, shards=count)))
    queries = []
    for i in range(count):
        rows = min(SHARD_ROWS, args.n - i * SHARD_ROWS)
        held = QUERIES // count + (i < QUERIES % count)
        x, _ = make_retrieval_data(rows + held, args.dim, seed=i, noise=0.35, spectrum=1.0)
        queries.append(x[rows:])
        start = i * SHARD_ROWS
        save_embeddings(osp.join(out, 'shards', f'shard_{i:06d}.npz'),
                        EmbeddingSet(x[:rows], ids=[f'v{start + j:09d}' for j in range(rows)],
                                     identity=identity))
        del x
    queries = np.concatenate(queries)
    from irtbox.structures.embeddings_file import load_embeddings
    scores, exact = np.full((QUERIES, K), -np.inf, np.float32), np.zeros((QUERIES, K), np.int64)
    for i in range(count):
        shard = load_embeddings(osp.join(out, 'shards', f'shard_{i:06d}.npz')).embeddings
        for start in range(0, len(shard), 65536):
            block = queries @ np.asarray(shard[start:start + 65536]).T
            s = np.concatenate([scores, block], 1)
            offset = i * SHARD_ROWS + start
            p = np.concatenate([exact, np.broadcast_to(
                np.arange(offset, offset + block.shape[1]), block.shape)], 1)
            best = np.argpartition(-s, K - 1, axis=1)[:, :K]
            scores, exact = np.take_along_axis(s, best, 1), np.take_along_axis(p, best, 1)
    np.save(osp.join(args.data_dir, 'queries.npy'), queries)
    np.save(osp.join(args.data_dir, 'exact.npy'), exact)
    return dict(seconds=0)


def measure(search, args, warm_up=True):
    """p50 / p99 of one query per call on one thread (the first LATENCY_QUERIES: a Flat
    index of millions takes 0.1 s and more a query; after 5 warm-up queries, unless not
    ``warm_up``), then recall@10 of the held-out queries (searched together), then the
    p50 / p99 of the same single queries again (``again_``: the lists and rows they read
    are in memory by then). ``search``: a batch of queries -> the positions of their top K."""
    import faiss
    queries = np.load(osp.join(args.data_dir, 'queries.npy'))
    exact = np.load(osp.join(args.data_dir, 'exact.npy'))
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    for q in queries[-5:] if warm_up else []:
        search(q[None])

    def each():
        times = []
        for q in queries[:LATENCY_QUERIES]:
            started = time.perf_counter()
            search(q[None])
            times.append(time.perf_counter() - started)
        return times
    times = each()
    faiss.omp_set_num_threads(threads)
    found = search(queries)
    recall = float(np.mean([len(set(f) & set(e)) / K for f, e in zip(found, exact)]))
    faiss.omp_set_num_threads(1)
    again = each()  # the same queries once more: what they touch is in memory now
    faiss.omp_set_num_threads(threads)
    return dict(recall=recall, p50_ms=1000 * float(np.percentile(times, 50)),
                p99_ms=1000 * float(np.percentile(times, 99)),
                again_p50_ms=1000 * float(np.percentile(again, 50)),
                again_p99_ms=1000 * float(np.percentile(again, 99)))


def run_irtbox_build(args):
    from irtbox.search.budget import parse_size
    from irtbox.search.build import build_index_from_features
    from irtbox.utils.memory import map_large_blocks, peak_rss_mb
    map_large_blocks()  # as the search command does before a build
    started = time.perf_counter()
    factory = args.one[2] if len(args.one) > 2 and args.one[2] else None
    done = build_index_from_features(osp.join(args.data_dir, 'extract'), args.index_dir,
                                     factory=factory, max_index_memory=parse_size(args.one[1]),
                                     progress=False,
                                     log=lambda line: print(line, file=sys.stderr))
    seconds = time.perf_counter() - started
    index_file = glob.glob(osp.join(args.index_dir, 'index-*.faiss'))[0]
    stages = dict(done.report['stage_seconds'], save=round(seconds - sum(
        done.report['stage_seconds'].values()), 1))
    return dict(build_s=seconds, peak_mb=peak_rss_mb(), factory=done.report['factory'],
                nprobe=done.report['nprobe'], k_factor=done.report['k_factor'],
                index_mb=osp.getsize(index_file) / 2**20,
                train_rows=done.report['train_rows'], stages=stages,
                train_add_s=stages.get('train', 0) + stages['add'])


def run_irtbox_query(args):
    from irtbox.search import ImageSearcher
    from irtbox.utils.memory import peak_rss_mb
    cold = args.one[-1] == 'cold'

    def evict():  # the index folder's pages out of the page cache
        for path in glob.glob(osp.join(args.index_dir, '*')):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
    if cold:
        evict()
    started = time.perf_counter()
    searcher = ImageSearcher.load(args.index_dir, device='cpu')
    loaded = time.perf_counter() - started
    if cold:  # again: the sha256 check of load read them all
        evict()
    out = measure(lambda q: [[h.position for h in hits] for hits in searcher.search(q, k=K)],
                  args, warm_up=not cold)
    from irtbox.utils.memory import _status_mb
    return dict(out, query_peak_mb=peak_rss_mb(), load_s=loaded,
                query_anon_mb=_status_mb('RssAnon'), query_file_mb=_status_mb('RssFile'))


def run_faiss(args):
    import faiss

    from irtbox.structures.embeddings_file import load_embeddings
    from irtbox.utils.memory import peak_rss_mb
    factory, nprobe, train_rows = args.one[1], json.loads(args.one[2]), int(args.one[3])
    shards = sorted(glob.glob(osp.join(args.data_dir, 'extract', 'shards', '*.npz')))
    started = time.perf_counter()
    index = faiss.index_factory(args.dim, factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        per = -(-train_rows // len(shards))
        rng = np.random.default_rng(0)
        sample = np.concatenate([np.asarray(e[np.sort(rng.choice(len(e), min(per, len(e)),
                                                                  replace=False))])
                                 for e in (load_embeddings(s).embeddings for s in shards)])
        index.train(sample)
        del sample
    trained = time.perf_counter()
    for path in shards:
        emb = load_embeddings(path).embeddings
        for start in range(0, len(emb), 65536):
            index.add(np.ascontiguousarray(emb[start:start + 65536]))
    if nprobe:
        faiss.extract_index_ivf(index).nprobe = nprobe
    seconds = time.perf_counter() - started
    peak = peak_rss_mb()
    out = measure(lambda q: index.search(q, K)[1], args)
    return dict(out, build_s=seconds, peak_mb=peak, train_add_s=seconds,
                stages=dict(train=round(trained - started, 1),
                            add=round(started + seconds - trained, 1)),
                index_mb=len(faiss.serialize_index(index)) / 2**20)


def child(args):
    sys.path.insert(0, ROOT)
    run = dict(generate=generate, build=run_irtbox_build, query=run_irtbox_query,
               faiss=run_faiss)[args.one[0]]
    print(json.dumps(run(args)))


def spawn(args, *one):
    command = [sys.executable, __file__, '--n', str(args.n), '--dim', str(args.dim),
               '--data-dir', args.data_dir, '--index-dir', args.index_dir, '--one', *one]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--n', type=int, default=1_000_000)
    parser.add_argument('--dim', type=int, default=384)
    parser.add_argument('--budgets', nargs='+', default=['4G'])
    parser.add_argument('--factory', help='build this index instead of the one the budget '
                        'chooses (e.g. where the chosen one would not be built in the time '
                        'there is)')
    parser.add_argument('--no-floor', action='store_true',
                        help='irtbox only: no bare faiss contender (it is said in the table)')
    parser.add_argument('--data-dir', required=True,
                        help='a disk with room for the shards, twice over (the index keeps '
                        'a copy of the embeddings)')
    parser.add_argument('--index-dir', help=argparse.SUPPRESS)
    parser.add_argument('--keep-data', action='store_true',
                        help='keep the data (and use it again when it is there)')
    parser.add_argument('--one', nargs='+', help=argparse.SUPPRESS)  # run one step
    args = parser.parse_args()
    if args.one:
        return child(args)
    args.index_dir = osp.join(args.data_dir, 'index')
    started = time.perf_counter()
    if not (args.keep_data and osp.isfile(osp.join(args.data_dir, 'exact.npy'))):
        spawn(args, 'generate')
    print(f'{args.n} x {args.dim}: data in {time.perf_counter() - started:.0f} s', flush=True)
    rows = []
    try:
        for budget in args.budgets:
            built = spawn(args, 'build', budget, args.factory or '')
            queried = spawn(args, 'query', budget, 'warm')
            cold = spawn(args, 'query', budget, 'cold')
            queried.update({f'cold_{key}': cold[key] for key in ('p50_ms', 'p99_ms', 'recall')})
            floor = None if args.no_floor else spawn(
                args, 'faiss', built['factory'], json.dumps(built['nprobe']),
                str(built['train_rows']))
            rows.append((budget, dict(built, **queried), floor))
            print(json.dumps(rows[-1]), flush=True)
            shutil.rmtree(args.index_dir)
    finally:
        if not args.keep_data:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    print(f'\n{args.n} x {args.dim}, {QUERIES} held-out queries, k={K}, one query per call on '
          'one thread\n')
    print('| budget | contender | index (nprobe) | build (s) | train + add (s) | train + add / '
          'faiss | peak RSS build (MiB) | index (MiB) | recall@10 | p50 (ms) | p99 (ms) | p50 / '
          'faiss | cold p50 (ms) | cold p99 (ms) |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    for budget, ours, floor in rows:
        index = ours['factory'] + (f' ({ours["nprobe"]})' if ours['nprobe'] else '') + (
            f', re-ranking {ours["k_factor"]} x k' if ours.get('k_factor', 1) > 1 else '')
        for name, r in (('irtbox', ours), ('bare faiss', floor)):
            if name == 'bare faiss':  # the same index searched alone, without re-ranking
                index = index.split(', re-ranking')[0]
            if r is None:
                print(f'| {budget} | {name} | not run (--no-floor) ||||||||||||')
                continue
            ratio = (lambda key: f'{r[key] / floor[key]:.2f}' if floor else '-')
            print(f'| {budget} | {name} | {index} | {r["build_s"]:.0f} | {r["train_add_s"]:.0f} | '
                  f'{ratio("train_add_s")} | '
                  f'{r["peak_mb"]:.0f} | {r["index_mb"]:.0f} | {r["recall"]:.3f} | '
                  f'{r["p50_ms"]:.3f} | {r["p99_ms"]:.3f} | {ratio("p50_ms")} | '
                  + (f'{r["cold_p50_ms"]:.3f} | {r["cold_p99_ms"]:.3f} |' if 'cold_p50_ms' in r
                     else '- | - |'))


if __name__ == '__main__':
    main()
