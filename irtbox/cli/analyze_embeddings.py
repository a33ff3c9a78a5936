"""Descriptor analyses of El-Nouby et al. (Figs. 2/3 and 5) for models tested with tools/test.py.

Each NAME=PATH is a model's embeddings file from ``tools/test.py CONFIG CKPT --out PATH``
(its embeddings, labels, query flags and metrics; ``--set NAME`` picks the test set of a
multi-dataset result, e.g. ``--set 1``).
Writes to --out-dir:

- energy.png: the cumulative energy of the principal components of the
  descriptors against the component index (log2 axis, as in the paper), one
  line per model; a curve rising early means dimensional collapse (Figs. 2/3).
- similarities.png: one panel per model, the densities of the cosine
  similarities of positive and negative pairs overlaid (Fig. 5).
- analysis.json: per model, the effective dimensions (components holding
  80/90/99% of the energy), the energy curve, the pair counts, the mean
  positive/negative similarity, the histograms and the test metrics.

Pairs (--pairs): 'all' takes every unordered pair of descriptors; 'query-gallery'
every (query, gallery) pair by the file's is_query; 'auto' (default) the latter
when is_query marks some but not all descriptors (In-Shop), else 'all' (SOP, CUB).
--max-queries N estimates the histograms from N sampled query rows (seed
--seed) instead of all pairs, for large test sets (SOP: 1.8e9 pairs).
With --gnd gnd_rparis6k.pkl (revisited Oxford / Paris, as in the paper's Fig. 5:
RParis, Medium) the pairs are (query, database) ones, positives and junk from
the ground truth of --protocol, and the file needs no labels (tools/test.py
writes none for these sets).

Example (off-the-shelf vs contrastive vs contrastive + entropy regularisation):
  python tools/test.py configs/irt/irt-o_deit-s_sop.py --out work_dirs/an/irt_o.npz
  python tools/test.py configs/irt/irt-l_deit-s_1xb64-35k_sop.py irt_l.pth \
      --out work_dirs/an/irt_l.npz
  python tools/test.py configs/irt/irt-r_deit-s_1xb64-35k_sop.py irt_r.pth \
      --out work_dirs/an/irt_r.npz
  python tools/analysis_tools/analyze_embeddings.py IRT_O=work_dirs/an/irt_o.npz \\
      IRT_L=work_dirs/an/irt_l.npz IRT_R=work_dirs/an/irt_r.npz \\
      --out-dir work_dirs/an --max-queries 5000
  # Fig. 5 exactly: RParis (M), from the landmark configs' test .npz files
  python tools/analysis_tools/analyze_embeddings.py IRT_O=o.npz IRT_L=l.npz IRT_R=r.npz \
      --gnd data/rparis6k/gnd_rparis6k.pkl --protocol medium --out-dir work_dirs/fig5
"""
from typing import Dict, Tuple

from irtbox.cli import RESULTS_FLAGS, command_parser, worded
from irtbox.utils.checks import int_argument

__all__ = ['parse_args', 'main', 'parse_model']

def parse_model(text: str) -> Tuple[str, str]:
    """'NAME=PATH' -> (NAME, PATH), else SystemExit saying what was expected."""
    name, sep, path = text.partition('=')
    if not sep or not name or not path:
        raise SystemExit(f'expected NAME=PATH (e.g. IRT_R=work_dirs/irt_r.npz), got {text!r}')
    return name, path


def parse_args(argv=None):
    """The command line of ``analyze_embeddings.py``."""
    parser = command_parser(__doc__.splitlines()[0], __doc__)
    parser.add_argument('models', nargs='+', metavar='NAME=PATH',
                        help='a model name and the .npz written by tools/test.py --out')
    parser.add_argument('--out-dir', required=True, help='where the PNGs and analysis.json go')
    parser.add_argument('--bins', type=int_argument(1), default=200,
                        help='histogram bins over [-1, 1] (default: 200)')
    parser.add_argument('--pairs', choices=['auto', 'all', 'query-gallery'], default='auto',
                        help='which pairs the histograms count (default: auto, see below)')
    parser.add_argument('--max-queries', type=int_argument(1), default=None,
                        help='estimate the histograms from this many sampled query rows '
                             '(default: all pairs, exact)')
    parser.add_argument('--seed', type=int, default=0, help='seed of that sampling')
    parser.add_argument('--chunk-size', type=int_argument(1), default=1024,
                        help='query rows per block (memory ~ 3 x chunk x N x 8 bytes)')
    parser.add_argument('--energy-dims', type=int_argument(1), default=None,
                        help='plot the energy up to this component (default: all)')
    parser.add_argument('--linear-x', action='store_true',
                        help='linear component axis for energy.png (default: log2)')
    parser.add_argument('--gnd', help='revisited ground truth (gnd_roxford5k.pkl / '
                        'gnd_rparis6k.pkl): histograms of its (query, database) pairs')
    parser.add_argument('--protocol', choices=['easy', 'medium', 'hard'], default='medium',
                        help='the --gnd protocol whose positives and junk are used '
                             '(default: medium, as in the paper)')
    parser.add_argument('--set', default=None, metavar='NAME',
                        help="the test set of a multi-dataset result, e.g. '0' (default: the "
                        "file's only or main set)")
    return parser.parse_args(argv)


def main(argv=None) -> Dict[str, dict]:
    """Analyse the models' embeddings files, write the figures and analysis.json, print the
    table; returns {model name: analysis}."""
    args = parse_args(argv)
    models = [parse_model(m) for m in args.models]
    from irtbox.visualization.descriptor_analysis import analyze_result_files, format_table
    try:
        results = analyze_result_files(
            models, args.out_dir, name=args.set, gnd_file=args.gnd, protocol=args.protocol,
            pairs=args.pairs, bins=args.bins, max_queries=args.max_queries, seed=args.seed,
            chunk_size=args.chunk_size, energy_dims=args.energy_dims, log_x=not args.linear_x)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(worded(error, RESULTS_FLAGS)) from error
    print(format_table(results))
    print(f'written to {args.out_dir}: energy.png, similarities.png, analysis.json')
    return results
