"""A 2-D map of a test set's embeddings, coloured by class (PCA, t-SNE or UMAP).

RESULTS is the embeddings file of ``tools/test.py CONFIG CKPT --out results.npz`` (--set NAME
picks a test set of a multi-dataset result). Classes that form
tight, separate islands are retrieved well; mixed regions show the classes a model confuses
(compare with failures.csv of ``browse_results.py``). A legend is drawn for up to 20
classes; --thumbnails N draws N sampled images at their points (needs the image paths that
tools/test.py --out stores).

Methods: 'pca' (instant, linear), 'tsne' (scikit-learn; a few seconds per thousand points),
'umap' (the umap extra: pip install "irtbox[umap]"). --max-points samples that many points (seed
--seed) so that t-SNE stays fast on large test sets.

Examples:
  python tools/test.py CONFIG CKPT --out work_dirs/res/results.npz
  python tools/analysis_tools/plot_embeddings.py work_dirs/res/results.npz --method tsne \\
      --out work_dirs/res/tsne.png
  python tools/analysis_tools/plot_embeddings.py results.npz --method pca --out pca.png \\
      --thumbnails 30
"""

from irtbox.cli import RESULTS_FLAGS, command_parser, worded
from irtbox.utils.checks import int_argument

__all__ = ['parse_args', 'main']

def parse_args(argv=None):
    """The command line of ``plot_embeddings.py``."""
    parser = command_parser('2-D map of test embeddings coloured by class.', __doc__)
    parser.add_argument('results', help='the .npz of tools/test.py --out')
    parser.add_argument('--method', choices=['pca', 'tsne', 'umap'], default='tsne',
                        help='projection (default tsne)')
    parser.add_argument('--out', required=True, help='image file to write (e.g. map.png)')
    parser.add_argument('--max-points', type=int_argument(3), default=5000,
                        help='at most this many points, sampled (default 5000)')
    parser.add_argument('--thumbnails', type=int_argument(0), default=0,
                        help='draw this many sampled images at their points (default 0)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the sampling and t-SNE')
    parser.add_argument('--set', default=None, metavar='NAME',
                        help="the test set of a multi-dataset result, e.g. '1' (default: the "
                        "file's only or main set)")
    return parser.parse_args(argv)


def main(argv=None):
    """Draw the map; returns its points (m x 2)."""
    args = parse_args(argv)
    from irtbox.visualization import plot_results_map
    try:
        points = plot_results_map(args.results, args.out, method=args.method, name=args.set,
                                  max_points=args.max_points, thumbnails=args.thumbnails,
                                  seed=args.seed)
    except (FileNotFoundError, ValueError, ImportError) as error:
        raise SystemExit(worded(error, RESULTS_FLAGS)) from error
    print(f'map written to {args.out}')
    return points
