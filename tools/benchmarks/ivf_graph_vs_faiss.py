"""The approximate re-ranking graph (``neighbour_graph(method='ivf')``) against faiss's own
IVF-Flat search of every row with the same centroids and nprobe: CPU seconds of each on one
thread, and whether the graphs agree.

  python tools/benchmarks/ivf_graph_vs_faiss.py --db-size 50000 --dim 512 --nprobe 16
"""
import argparse
import os.path as osp
import sys
import time

import numpy as np
import torch

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))


def main():
    from bench_eval import make_retrieval_data
    from irtbox.evaluation.functional.neighbour_graph import _ivf_centroids, neighbour_graph
    from irtbox.evaluation.neighbours.faiss_index import import_faiss
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--db-size', type=int, default=50000)
    parser.add_argument('--dim', type=int, default=512)
    parser.add_argument('--nprobe', type=int, default=16)
    parser.add_argument('--k', type=int, default=50)
    args = parser.parse_args()
    faiss = import_faiss()
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    db = make_retrieval_data(args.db_size, args.dim, spectrum=1.0)[0]
    nlist = round(args.db_size ** 0.5)
    cpu = time.process_time()
    graph = neighbour_graph(db, args.k, method='ivf', nlist=nlist, nprobe=args.nprobe)
    ours = time.process_time() - cpu
    quantizer = faiss.IndexFlatIP(args.dim)
    quantizer.add(_ivf_centroids(db, nlist, 0))
    index = faiss.IndexIVFFlat(quantizer, args.dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.add(db)
    index.nprobe = args.nprobe
    cpu = time.process_time()
    ids = index.search(db, args.k + 1)[1]
    theirs = time.process_time() - cpu
    own = ids == np.arange(len(db))[:, None]
    same = np.mean(ids[~own].reshape(len(db), args.k) == graph.ids) if own.any(1).all() else 0
    print(f'{args.db_size:,} x {args.dim}, nlist {nlist}, nprobe {args.nprobe}, k {args.k}: '
          f'neighbour_graph(ivf) {ours:.1f} CPU s (with its k-means), faiss IVF-Flat search '
          f'{theirs:.1f} CPU s; the same neighbours at {same:.4f} of the places')


if __name__ == '__main__':
    main()
