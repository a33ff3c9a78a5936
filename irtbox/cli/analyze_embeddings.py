"""Descriptor analyses of El-Nouby et al. (Figs. 2/3 and 5) for models tested with tools/test.py.

Each NAME=PATH is a model's ``.npz`` from ``tools/test.py CONFIG CKPT --out PATH``
(arrays 'embeddings', 'labels', optionally 'is_query' and 'metrics/<name>').
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
the ground truth of --protocol, and the .npz needs no labels (tools/test.py
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
import argparse
import json
import os
import os.path as osp
from typing import Dict, Optional, Tuple

import numpy as np

ENERGY_FRACTIONS = (0.8, 0.9, 0.99)


def parse_model(text: str) -> Tuple[str, str]:
    """'NAME=PATH' -> (NAME, PATH), else SystemExit saying what was expected."""
    name, sep, path = text.partition('=')
    if not sep or not name or not path:
        raise SystemExit(f'expected NAME=PATH (e.g. IRT_R=work_dirs/irt_r.npz), got {text!r}')
    return name, path


def load_npz(path: str, prefix: str = '', need_labels: bool = True) -> Dict[str, np.ndarray]:
    """The embeddings, labels (None when absent and not ``need_labels``), is_query (or
    None) and metrics of a tools/test.py ``.npz``."""
    if not osp.isfile(path):
        raise SystemExit(f'embeddings file not found: {path}')
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SystemExit(f'{path}: not a readable .npz file ({e})')
    with data:
        keys = list(data.keys())
        required = ('embeddings', 'labels') if need_labels else ('embeddings', 'is_query')
        missing = [k for k in required if prefix + k not in keys]
        if missing:
            hint = ''
            prefixed = sorted(k[:-len('embeddings')] for k in keys
                              if k.endswith('/embeddings') and not k.startswith('metrics/'))
            if prefixed and not prefix:
                hint = f' (it holds several test sets: pass --prefix, one of {prefixed})'
            raise SystemExit(f'{path}: no {", ".join(repr(prefix + k) for k in missing)} array; '
                             f'expected the .npz of tools/test.py --out with a RetrievalMetric '
                             f'(it has {keys}){hint}')
        out = dict(embeddings=data[prefix + 'embeddings'],
                   labels=data[prefix + 'labels'] if prefix + 'labels' in keys else None,
                   is_query=data[prefix + 'is_query'] if prefix + 'is_query' in keys else None,
                   metrics={k[len('metrics/'):]: float(data[k]) for k in keys
                            if k.startswith('metrics/') and data[k].size == 1})
    if out['embeddings'].ndim != 2:
        raise SystemExit(f'{path}: {prefix}embeddings has shape {out["embeddings"].shape}; '
                         'expected N x D')
    if out['labels'] is not None and out['labels'].shape != (len(out['embeddings']), ):
        raise SystemExit(f'{path}: {prefix}labels has shape {out["labels"].shape}; expected '
                         f'({len(out["embeddings"])},), one label per embedding')
    return out


def analyze(data: dict, pairs: str = 'auto', bins: int = 200, max_queries: Optional[int] = None,
            seed: int = 0, chunk_size: int = 1024, gnd: Optional[list] = None) -> dict:
    """The JSON-ready analysis of one model's arrays (as from :func:`load_npz`); with
    ``gnd`` (per-query ``ok`` / ``junk`` database indices) the histograms are those of
    the (query, database) pairs of that ground truth."""
    from irtbox.evaluation.functional import (cumulative_energy, ground_truth_histograms,
                                              similarity_histograms)
    emb, is_query = data['embeddings'], data['is_query']
    if gnd is not None:
        is_query = is_query.astype(bool)
        hist = ground_truth_histograms(emb[is_query], emb[~is_query], gnd, bins=bins,
                                       chunk_size=chunk_size, progress=True)
        return _result(data, cumulative_energy(emb), hist, 'ground-truth')
    split = is_query is not None and bool(is_query.any()) and not bool(is_query.all())
    if pairs == 'query-gallery' and not split:
        raise ValueError("--pairs query-gallery needs an is_query array marking some but not all "
                         'descriptors as queries')
    query_mask = is_query.astype(bool) if pairs == 'query-gallery' or (
        pairs == 'auto' and split) else None
    hist = similarity_histograms(emb, data['labels'], bins=bins, max_queries=max_queries,
                                 seed=seed, chunk_size=chunk_size, query_mask=query_mask,
                                 progress=True)
    return _result(data, cumulative_energy(emb), hist,
                   'query-gallery' if query_mask is not None else 'all')


def _result(data: dict, energy: np.ndarray, hist: dict, pairs: str) -> dict:
    from irtbox.evaluation.functional import effective_dimension
    emb = data['embeddings']
    return dict(
        num_descriptors=int(emb.shape[0]), dim=int(emb.shape[1]),
        effective_dims={str(f): effective_dimension(energy, f) for f in ENERGY_FRACTIONS},
        energy=energy.tolist(), pairs=pairs, exact=hist['exact'],
        num_positive=hist['num_positive'], num_negative=hist['num_negative'],
        mean_positive=_finite_or_none(hist['mean_positive']),
        mean_negative=_finite_or_none(hist['mean_negative']),
        edges=hist['edges'].tolist(), positive=hist['positive'].tolist(),
        negative=hist['negative'].tolist(), metrics=data['metrics'])


def _finite_or_none(value: float) -> Optional[float]:
    # A set without positive (or negative) pairs has no mean; JSON has no NaN.
    return float(value) if np.isfinite(value) else None


def _mean_text(value: Optional[float]) -> str:
    return 'n/a' if value is None else f'{value:.4f}'


def _density(counts, edges) -> np.ndarray:
    counts, edges = np.asarray(counts, dtype=np.float64), np.asarray(edges)
    total = counts.sum()
    return counts / (total * np.diff(edges)) if total else counts


def plot_energy(results: Dict[str, dict], out_path: str, max_dims: Optional[int] = None,
                log_x: bool = True) -> str:
    """Cumulative energy against the component index, one line per model."""
    from irtbox.visualization.plotting import pyplot
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, r in results.items():
        energy = np.asarray(r['energy'])[:max_dims]
        ax.plot(np.arange(1, len(energy) + 1), energy,
                label=f'{name} (90% at {r["effective_dims"]["0.9"]})')
    if log_x:
        ax.set_xscale('log', base=2)
    ax.set_xlabel('principal component')
    ax.set_ylabel('cumulative energy')
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def plot_similarities(results: Dict[str, dict], out_path: str) -> str:
    """One panel per model: the densities of positive and negative pair similarities."""
    from irtbox.visualization.plotting import pyplot
    plt = pyplot()
    # Each panel its own density scale: an untrained model's peak would flatten the others.
    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.4), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        for kind, colour in (('positive', 'tab:green'), ('negative', 'tab:red')):
            ax.stairs(_density(r[kind], r['edges']), r['edges'], fill=True, alpha=0.45,
                      color=colour, label=f'{kind} (mean {_mean_text(r[f"mean_{kind}"])})')
        ax.set_title(name + ('' if r['exact'] else ' (sampled)'))
        ax.set_xlabel('cosine similarity')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_ylabel('density')
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    plt.close(fig)
    return out_path


def format_table(results: Dict[str, dict]) -> str:
    """A short text table of the single numbers of each model."""
    header = ['model', 'N', 'D'] + [f'd@{f:g}' for f in ENERGY_FRACTIONS] + [
        'mean pos', 'mean neg', '#pos', '#neg']
    rows = [header]
    for name, r in results.items():
        rows.append([name, str(r['num_descriptors']), str(r['dim'])]
                    + [str(r['effective_dims'][str(f)]) for f in ENERGY_FRACTIONS]
                    + [_mean_text(r['mean_positive']), _mean_text(r['mean_negative']),
                       str(r['num_positive']), str(r['num_negative'])])
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    return '\n'.join('  '.join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('models', nargs='+', metavar='NAME=PATH',
                        help='a model name and the .npz written by tools/test.py --out')
    parser.add_argument('--out-dir', required=True, help='where the PNGs and analysis.json go')
    parser.add_argument('--bins', type=int, default=200,
                        help='histogram bins over [-1, 1] (default: 200)')
    parser.add_argument('--pairs', choices=['auto', 'all', 'query-gallery'], default='auto',
                        help='which pairs the histograms count (default: auto, see below)')
    parser.add_argument('--max-queries', type=int, default=None,
                        help='estimate the histograms from this many sampled query rows '
                             '(default: all pairs, exact)')
    parser.add_argument('--seed', type=int, default=0, help='seed of that sampling')
    parser.add_argument('--chunk-size', type=int, default=1024,
                        help='query rows per block (memory ~ 3 x chunk x N x 8 bytes)')
    parser.add_argument('--energy-dims', type=int, default=None,
                        help='plot the energy up to this component (default: all)')
    parser.add_argument('--linear-x', action='store_true',
                        help='linear component axis for energy.png (default: log2)')
    parser.add_argument('--gnd', help='revisited ground truth (gnd_roxford5k.pkl / '
                        'gnd_rparis6k.pkl): histograms of its (query, database) pairs')
    parser.add_argument('--protocol', choices=['easy', 'medium', 'hard'], default='medium',
                        help='the --gnd protocol whose positives and junk are used '
                             '(default: medium, as in the paper)')
    parser.add_argument('--prefix', default='',
                        help="array prefix of one test set in a multi-dataset .npz, e.g. '0/'")
    args = parser.parse_args(argv)
    for option in ('bins', 'max_queries', 'chunk_size', 'energy_dims'):
        value = getattr(args, option)
        if value is not None and value < 1:
            parser.error(f'--{option.replace("_", "-")} must be >= 1, got {value}')
    return args


def load_gnd(path: str, protocol: str) -> list:
    """Per-query ``ok`` / ``junk`` indices of ``protocol`` from a revisited ``gnd_*.pkl``."""
    from irtbox.visualization import load_revisited_gnd
    try:
        return load_revisited_gnd(path, protocol, 'analyze_embeddings', key='--gnd')
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error))


def main(argv=None) -> Dict[str, dict]:
    args = parse_args(argv)
    models = [parse_model(m) for m in args.models]
    names = [name for name, _ in models]
    if len(set(names)) != len(names):
        raise SystemExit(f'model names must be unique, got {names}')
    gnd = load_gnd(args.gnd, args.protocol) if args.gnd else None
    loaded = [(name, path, load_npz(path, args.prefix, need_labels=gnd is None))
              for name, path in models]
    results = {}
    for name, path, data in loaded:
        print(f'{name}: {len(data["embeddings"])} descriptors from {path}', flush=True)
        try:
            results[name] = analyze(data, pairs=args.pairs, bins=args.bins,
                                    max_queries=args.max_queries, seed=args.seed,
                                    chunk_size=args.chunk_size, gnd=gnd)
        except ValueError as e:
            raise SystemExit(f'{path}: {e}')
        results[name]['path'] = path
    os.makedirs(args.out_dir, exist_ok=True)
    plot_energy(results, osp.join(args.out_dir, 'energy.png'), args.energy_dims,
                log_x=not args.linear_x)
    plot_similarities(results, osp.join(args.out_dir, 'similarities.png'))
    with open(osp.join(args.out_dir, 'analysis.json'), 'w') as f:
        json.dump(results, f, indent=1)
    print(format_table(results))
    print(f'written to {args.out_dir}: energy.png, similarities.png, analysis.json')
    return results
