"""A 2-D map of a test set's embeddings, coloured by class (PCA, t-SNE or UMAP).

RESULTS is the .npz of ``tools/test.py CONFIG CKPT --out results.npz``. Classes that form
tight, separate islands are retrieved well; mixed regions show the classes a model confuses
(compare with failures.csv of ``browse_results.py``). A legend is drawn for up to 20
classes; --thumbnails N draws N sampled images at their points (needs the image paths that
tools/test.py --out stores).

Methods: 'pca' (instant, linear), 'tsne' (scikit-learn; a few seconds per thousand points),
'umap' (optional: pip install umap-learn). --max-points samples that many points (seed
--seed) so that t-SNE stays fast on large test sets.

Examples:
  python tools/test.py CONFIG CKPT --out work_dirs/res/results.npz
  python tools/analysis_tools/plot_embeddings.py work_dirs/res/results.npz --method tsne \\
      --out work_dirs/res/tsne.png
  python tools/analysis_tools/plot_embeddings.py results.npz --method pca --out pca.png \\
      --thumbnails 30
"""
import argparse
import os.path as osp


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='2-D map of test embeddings coloured by class.',
                                     epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('results', help='the .npz of tools/test.py --out')
    parser.add_argument('--method', choices=['pca', 'tsne', 'umap'], default='tsne',
                        help='projection (default tsne)')
    parser.add_argument('--out', required=True, help='image file to write (e.g. map.png)')
    parser.add_argument('--max-points', type=int, default=5000,
                        help='at most this many points, sampled (default 5000)')
    parser.add_argument('--thumbnails', type=int, default=0,
                        help='draw this many sampled images at their points (default 0)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the sampling and t-SNE')
    parser.add_argument('--prefix', default='', help="test set of a multi-dataset result, "
                        "e.g. '1/'")
    args = parser.parse_args(argv)
    if args.max_points < 3 or args.thumbnails < 0:
        parser.error('--max-points must be at least 3 and --thumbnails not negative')
    return args


def main(argv=None):
    args = parse_args(argv)
    import numpy as np

    from irtbox.visualization import embed_2d, load_results, load_tile, plot_embedding_map
    need = ('embeddings', ) + (('image_paths', ) if args.thumbnails else ())
    try:
        data = load_results(args.results, args.prefix, need=need)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error))
    emb, labels = data['embeddings'], data['labels']
    rng = np.random.default_rng(args.seed)
    keep = np.arange(len(emb))
    if len(emb) > args.max_points:
        keep = np.sort(rng.choice(len(emb), args.max_points, replace=False))
    if len(keep) < 3:
        raise SystemExit(f'{args.results}: {len(keep)} embeddings; a map needs at least 3')
    try:
        points = embed_2d(emb[keep], args.method, seed=args.seed)
    except ImportError as error:
        raise SystemExit(str(error))
    thumbs = []
    for i in rng.choice(len(keep), min(args.thumbnails, len(keep)), replace=False):
        thumbs.append((int(i), np.asarray(load_tile(data['image_paths'][keep[i]], 64))))
    title = f'{osp.basename(args.results)}: {args.method}, {len(keep)} of {len(emb)} samples'
    plot_embedding_map(points, None if labels is None else labels[keep], args.out,
                       class_names=data['class_names'], title=title, thumbnails=thumbs)
    print(f'map written to {args.out}')
    return points
