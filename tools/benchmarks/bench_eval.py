"""Evaluation cost against its floors, each contender in its own process.

Retrieval (SOP-sized by default):

  python tools/benchmarks/bench_eval.py [--n 60502] [--dim 384] [--ks 1 10 100 1000]
      [--contenders faiss_k1001 torch_product irtbox_torch irtbox_faiss irtbox_approx pml]
      [--index IVF256,Flat --nprobe 4]   # the faiss index of irtbox_approx
      [--noise 0.35 --spectrum 1.0]   # embeddings with a trained model's power-law spectrum
      [--json out.json] [--md out.md]

Landmarks (revisited Oxford / Paris with distractors):

  python tools/benchmarks/bench_eval.py --landmarks [--queries 70] [--n 1000000] [--dim 768]

Synthetic data with a class structure: ``n`` unit vectors around ``n / 5.35`` random class
centres (SOP's mean class size), labels drawn uniformly (so some classes have one image
and the largest a dozen or so). The parent writes the data to a temporary folder once;
every contender is a fresh ``python`` process that loads it, resets its peak resident
memory (``/proc/self/clear_refs``), and reports the wall time of the timed call and the
extra peak RSS over what it held before the call (VmHWM, see irtbox/utils/memory.py). Several
``--n`` give the scaling table.

Contenders (retrieval): ``faiss_k1001`` = ``faiss.IndexFlatIP`` add + ``search(k=1001)`` of
every item (the floor: one matrix product plus selection); ``torch_product`` = the same
chunked matrix product in torch with no selection at all; ``irtbox_torch`` /
``irtbox_faiss`` = ``retrieval_metrics(emb, labels, ks)`` (Recall@K, MAP@R, R-precision,
Precision@1, leave-one-out) with ``ExactSearcher()`` / ``FaissSearcher()`` (exact, 'Flat');
``irtbox_approx`` = the same with ``FaissSearcher(factory=--index, nprobe=--nprobe)``, which also
reports ``search_recall@10`` against exact search (training the index timed too); ``pml`` =
PyTorch Metric Learning's ``AccuracyCalculator``
(precision_at_1, r_precision, mean_average_precision_at_r, k = max_bin_count) when it is
installed. Ratios are to the ``faiss_k1001`` time of the same run; ``exact / time`` is
``irtbox_torch``'s time over the contender's (the speed-up over exact evaluation). Each
contender also reports its CPU seconds (all its threads; ``CPU / floor``), which a load from
other jobs on the machine inflates much less than the wall time.

Contenders (landmarks, ``q`` x ``n`` scores): ``numpy_argsort`` = the score matrix and
``numpy.argsort`` of it (the floor); ``rank_database`` = ``rank_database`` + ``revisited_map``
for Easy / Medium / Hard (the revisitop interface); ``revisited_metrics`` = the same numbers
without a ranking.
"""
import argparse
import importlib.util
import json
import os
import os.path as osp
import sys
import tempfile
import time

import numpy as np

from irtbox.utils.benchmark import run_contender, write_report
from irtbox.utils.memory import peak_rss_mb, reset_peak

RETRIEVAL = ('faiss_k1001', 'torch_product', 'irtbox_torch', 'irtbox_faiss', 'irtbox_approx',
             'pml')
LANDMARKS = ('numpy_argsort', 'rank_database', 'revisited_metrics')
PML_METRICS = {'precision_at_1': 'precision@1', 'r_precision': 'r_precision',
               'mean_average_precision_at_r': 'map@r'}


def make_retrieval_data(n, dim, seed=0, noise=1.9, spectrum=0.0):
    """``n`` x ``dim`` float32 unit rows around n / 5.35 class centres, and their labels.

    ``spectrum`` = a: dimension i (1-based) of centres and noise is scaled by i^-a (mean
    square 1), a power-law variance spectrum like a trained model's embeddings have; 0 gives
    isotropic data, where no index can partition the space (the worst case for IVF).
    """
    rng = np.random.default_rng(seed)
    classes = max(1, round(n / 5.35))
    labels = rng.integers(0, classes, n)
    scale = np.arange(1, dim + 1, dtype=np.float64) ** -spectrum
    scale = (scale / np.sqrt(np.mean(scale ** 2))).astype(np.float32)
    centres = rng.standard_normal((classes, dim), dtype=np.float32) * scale
    emb = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 65536):  # bounded temporaries
        lab = labels[start:start + 65536]
        block = centres[lab] + noise * scale * rng.standard_normal((len(lab), dim),
                                                                   dtype=np.float32)
        emb[start:start + len(lab)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return emb, labels


def make_landmark_data(queries, n, dim, seed=0):
    """Queries, a database and Easy / Hard / Junk lists: positives near their query at
    varied distances (some hard ones deep in the ranking), the rest distractors."""
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((queries, dim), dtype=np.float32)
    query /= np.linalg.norm(query, axis=1, keepdims=True)
    db = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 65536):
        block = rng.standard_normal((min(65536, n - start), dim), dtype=np.float32)
        db[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    gnd = []
    taken = rng.permutation(min(n, 5000 * max(1, queries // 70 + 1)))
    per = len(taken) // queries
    for i in range(queries):
        own = taken[i * per:(i + 1) * per][:200]
        easy, hard, junk = own[:40], own[40:100], own[100:200]
        for idx, noise in ((easy, rng.uniform(0.3, 1, len(easy))),
                           (hard, rng.uniform(1, 30, len(hard))),
                           (junk, rng.uniform(0.5, 3, len(junk)))):
            v = query[i] + noise[:, None] * rng.standard_normal((len(idx), dim),
                                                                dtype=np.float32) / np.sqrt(dim)
            db[idx] = v / np.linalg.norm(v, axis=1, keepdims=True)
        gnd.append(dict(easy=easy.tolist(), hard=hard.tolist(), junk=junk.tolist()))
    return query, db, gnd


def run_retrieval(name, folder, ks, args):
    emb = np.load(osp.join(folder, 'emb.npy'))
    labels = np.load(osp.join(folder, 'labels.npy'))
    import torch  # noqa: F401  (imports are not timed)
    if name == 'faiss_k1001':
        import faiss

        def call():
            index = faiss.IndexFlatIP(emb.shape[1])
            index.add(emb)
            index.search(emb, min(1001, len(emb)))
            return {}
    elif name == 'torch_product':
        from irtbox.evaluation.functional.ranking import auto_chunk_size

        def call():
            t = torch.from_numpy(emb)
            chunk = auto_chunk_size(None, len(emb))
            for start in range(0, len(t), chunk):
                t[start:start + chunk] @ t.T
            return {}
    elif name in ('irtbox_torch', 'irtbox_faiss', 'irtbox_approx'):
        from irtbox.evaluation.functional import retrieval_metrics
        from irtbox.evaluation.neighbours import ExactSearcher, FaissSearcher
        searcher = {'irtbox_torch': ExactSearcher(), 'irtbox_faiss': FaissSearcher(),
                    'irtbox_approx': FaissSearcher(factory=args.index, nprobe=args.nprobe)}[name]

        def call():
            return retrieval_metrics(emb, labels, ks=ks, searcher=searcher)
    elif name == 'pml':
        from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

        def call():
            calculator = AccuracyCalculator(include=tuple(PML_METRICS), k='max_bin_count',
                                            device=torch.device('cpu'))
            out = calculator.get_accuracy(torch.from_numpy(emb), torch.from_numpy(labels))
            return {PML_METRICS[k]: float(v) for k, v in out.items()}
    else:
        raise ValueError(f'unknown contender {name!r}')
    return measure(call)


def run_landmarks(name, folder):
    query = np.load(osp.join(folder, 'query.npy'))
    db = np.load(osp.join(folder, 'db.npy'))
    with open(osp.join(folder, 'gnd.json')) as f:
        gnd_raw = json.load(f)
    import torch  # noqa: F401
    from irtbox.evaluation.functional import (build_revisited_gnd, rank_database,
                                              revisited_map, revisited_metrics)
    protocols = ('easy', 'medium', 'hard')
    gnds = {p: build_revisited_gnd(gnd_raw, p) for p in protocols}
    if name == 'numpy_argsort':
        def call():
            np.argsort(query @ db.T, axis=1)
            return {}
    elif name == 'rank_database':
        def call():
            ranks = rank_database(query, db)
            return {f'mAP_{p[0].upper()}': 100 * revisited_map(ranks, gnds[p])[0]
                    for p in protocols}
    elif name == 'revisited_metrics':
        def call():
            out = revisited_metrics(query, db, gnds)
            return {f'mAP_{p[0].upper()}': 100 * out[p][0] for p in protocols}
    else:
        raise ValueError(f'unknown contender {name!r}')
    return measure(call)


def measure(call):
    before = reset_peak()
    started, cpu_started = time.perf_counter(), time.process_time()
    metrics = call()
    seconds = time.perf_counter() - started
    # CPU seconds of all the process's threads: on a machine shared with other jobs the wall
    # time grows with their load, the CPU time much less.
    return dict(seconds=seconds, cpu_seconds=time.process_time() - cpu_started,
                extra_peak_mb=peak_rss_mb() - before, metrics=metrics)


def child(args):
    if args.landmarks:
        return run_landmarks(args.child, args.data)
    return run_retrieval(args.child, args.data, tuple(args.ks), args)


def spawn(args, name, folder):
    cmd = [sys.executable, osp.abspath(__file__), '--child', name, '--data', folder,
           '--index', args.index, '--nprobe', str(args.nprobe), '--ks'] + \
        [str(k) for k in args.ks] + (['--landmarks'] if args.landmarks else [])
    return run_contender(cmd, name)


def available(name):
    """Whether a contender can run here (pml: installed); the parent imports nothing heavy for
    it (importing PyTorch Metric Learning would load torch into the parent: ~2 s for nothing)."""
    return name != 'pml' or importlib.util.find_spec('pytorch_metric_learning') is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--landmarks', action='store_true', help='the landmark benchmark')
    parser.add_argument('--n', type=int, nargs='+', default=None,
                        help='items (retrieval: 60502) or database size (landmarks: 1000000); '
                        'several values give a scaling table')
    parser.add_argument('--dim', type=int, default=None, help='384 (retrieval) / 768')
    parser.add_argument('--queries', type=int, default=70, help='landmark queries')
    parser.add_argument('--ks', type=int, nargs='+', default=[1, 10, 100, 1000],
                        help='the K of Recall@K')
    parser.add_argument('--noise', type=float, default=1.9,
                        help='within-class spread of the synthetic retrieval embeddings')
    parser.add_argument('--spectrum', type=float, default=0.0,
                        help='power-law exponent of their variance spectrum (0: isotropic)')
    parser.add_argument('--index', default='IVF256,Flat',
                        help='faiss factory string of irtbox_approx')
    parser.add_argument('--nprobe', type=int, default=4, help='nprobe of irtbox_approx')
    parser.add_argument('--contenders', nargs='+', default=None,
                        help=f'some of {RETRIEVAL} or, with --landmarks, {LANDMARKS}')
    parser.add_argument('--json', help='write the results here')
    parser.add_argument('--md', help='write the markdown table here')
    parser.add_argument('--child', help=argparse.SUPPRESS)  # run one contender
    parser.add_argument('--data', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    family = LANDMARKS if args.landmarks else RETRIEVAL
    contenders = [c for c in (args.contenders or family) if available(c)]
    unknown = set(contenders) - set(family)
    if unknown:
        parser.error(f'unknown contenders {sorted(unknown)}; expected some of {family}')
    sizes = args.n or [1000000 if args.landmarks else 60502]
    dim = args.dim or (768 if args.landmarks else 384)
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as folder:
            if args.landmarks:
                query, db, gnd = make_landmark_data(args.queries, n, dim)
                np.save(osp.join(folder, 'query.npy'), query)
                np.save(osp.join(folder, 'db.npy'), db)
                with open(osp.join(folder, 'gnd.json'), 'w') as f:
                    json.dump(gnd, f)
                del query, db
            else:
                emb, labels = make_retrieval_data(n, dim, noise=args.noise,
                                                  spectrum=args.spectrum)
                np.save(osp.join(folder, 'emb.npy'), emb)
                np.save(osp.join(folder, 'labels.npy'), labels)
                del emb
            for name in contenders:
                result = spawn(args, name, folder)
                rows.append(dict(contender=name, n=n, dim=dim, **result))
                print(f'{name} n={n}: {result["seconds"]:.2f} s ({result["cpu_seconds"]:.2f} '
                      f'CPU s), +{result["extra_peak_mb"]:.0f} MB', file=sys.stderr)
    write_report(markdown(rows, 'numpy_argsort' if args.landmarks else 'faiss_k1001'), rows,
                 args.json, args.md, cpus=os.cpu_count(), loadavg=os.getloadavg())


def markdown(rows, floor_name):
    floors = {r['n']: r for r in rows if r['contender'] == floor_name}
    exact = {r['n']: r['seconds'] for r in rows if r['contender'] == 'irtbox_torch'}
    keys = sorted({k for r in rows for k in r['metrics']})
    lines = ['| contender | n | time (s) | / ' + floor_name + ' | CPU (s) | CPU / floor | '
             'exact / time | extra peak RSS (MB) | ' + ' | '.join(keys) + ' |',
             '|---' * (8 + len(keys)) + '|']
    for r in rows:
        floor = floors.get(r['n'])
        ratio = f'{r["seconds"] / floor["seconds"]:.2f}x' if floor else ''
        cpu_ratio = f'{r["cpu_seconds"] / floor["cpu_seconds"]:.2f}x' if floor else ''
        speedup = f'{exact[r["n"]] / r["seconds"]:.2f}x' if r['n'] in exact else ''
        values = [f'{r["metrics"][k]:.4f}' if k in r['metrics'] else '' for k in keys]
        lines.append(f'| {r["contender"]} | {r["n"]} | {r["seconds"]:.2f} | {ratio} | '
                     f'{r["cpu_seconds"]:.2f} | {cpu_ratio} | {speedup} | '
                     f'{r["extra_peak_mb"]:.0f} | ' + ' | '.join(values) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
