"""Descriptor analyses of El-Nouby et al. (Figs. 2/3 and 5) of tested models: the cumulative
energy of the principal components of each model's test embeddings (dimensional collapse) and
the densities of the cosine similarities of its positive and negative pairs, from the embeddings
files their tests wrote. The maths is :mod:`irtbox.evaluation.functional.embedding_analysis`;
this module reads the files, draws the figures and writes ``analysis.json``."""
import json
import os
import os.path as osp
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from irtbox.evaluation.functional import (cumulative_energy, effective_dimension,
                                          ground_truth_histograms, similarity_histograms)
from irtbox.structures.embeddings_file import EmbeddingSet
from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write_text

from .plotting import pyplot, save_figure
from .results_file import load_result_set, load_revisited_gnd

__all__ = ['ENERGY_FRACTIONS', 'analyze_embedding_set', 'analyze_result_files', 'plot_energy',
           'plot_similarities', 'format_table']

ENERGY_FRACTIONS = (0.8, 0.9, 0.99)


def analyze_embedding_set(data: EmbeddingSet, pairs: str = 'auto', bins: int = 200,
                          max_queries: Optional[int] = None, seed: int = 0,
                          chunk_size: int = 1024, gnd: Optional[list] = None,
                          progress: bool = True) -> dict:
    """The JSON-ready analysis of one model's test embeddings ``data``: the cumulative
    energy of its principal components and effective dimensions, and the histograms of the
    cosine similarities of positive and negative pairs (``pairs``: 'all', 'query-gallery' by
    ``data.is_query``, or 'auto': the latter when ``is_query`` marks some but not all rows),
    from ``max_queries`` sampled query rows (``seed``) when given; with ``gnd`` (per-query
    ``ok`` / ``junk`` database indices) those of the (query, database) pairs of that ground
    truth. ``data.metrics`` are copied in. ``ValueError`` when ``pairs`` cannot be formed."""
    emb, is_query = np.asarray(data.embeddings), data.is_query
    if gnd is not None:
        is_query, pairs = is_query.astype(bool), 'ground-truth'
        hist = ground_truth_histograms(emb[is_query], emb[~is_query], gnd, bins=bins,
                                       chunk_size=chunk_size, progress=progress)
    else:
        split = is_query is not None and bool(is_query.any()) and not bool(is_query.all())
        if pairs == 'query-gallery' and not split:
            raise ArgumentError("pairs 'query-gallery' needs an is_query array marking some "
                                'but not all descriptors as queries', 'pairs', pairs)
        query_mask = is_query.astype(bool) if pairs == 'query-gallery' or (
            pairs == 'auto' and split) else None
        hist = similarity_histograms(emb, data.labels, bins=bins, max_queries=max_queries,
                                     seed=seed, chunk_size=chunk_size, query_mask=query_mask,
                                     progress=progress)
        pairs = 'all' if query_mask is None else 'query-gallery'
    energy = cumulative_energy(emb)
    return dict(
        num_descriptors=int(emb.shape[0]), dim=int(emb.shape[1]),
        effective_dims={str(f): effective_dimension(energy, f) for f in ENERGY_FRACTIONS},
        energy=energy.tolist(), pairs=pairs, exact=hist['exact'],
        num_positive=hist['num_positive'], num_negative=hist['num_negative'],
        mean_positive=_finite_or_none(hist['mean_positive']),
        mean_negative=_finite_or_none(hist['mean_negative']),
        edges=hist['edges'].tolist(), positive=hist['positive'].tolist(),
        negative=hist['negative'].tolist(), metrics=dict(data.metrics))


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
    fig, ax = pyplot().subplots(figsize=(5.5, 4))
    for name, r in results.items():
        energy = np.asarray(r['energy'])[:max_dims]
        ax.plot(np.arange(1, len(energy) + 1), energy,
                label=f'{name} (90% at {r["effective_dims"]["0.9"]})')
    if log_x:
        ax.set_xscale('log', base=2)
    ax.set(xlabel='principal component', ylabel='cumulative energy', ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, out_path)


def plot_similarities(results: Dict[str, dict], out_path: str) -> str:
    """One panel per model: the densities of positive and negative pair similarities."""
    # Each panel its own density scale: an untrained model's peak would flatten the others.
    fig, axes = pyplot().subplots(1, len(results), figsize=(4 * len(results), 3.4), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        for kind, colour in (('positive', 'tab:green'), ('negative', 'tab:red')):
            ax.stairs(_density(r[kind], r['edges']), r['edges'], fill=True, alpha=0.45,
                      color=colour, label=f'{kind} (mean {_mean_text(r[f"mean_{kind}"])})')
        ax.set(title=name + ('' if r['exact'] else ' (sampled)'), xlabel='cosine similarity',
               ylabel='density')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, out_path)


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


def analyze_result_files(models: Sequence[Tuple[str, str]], out_dir: str,
                         name: Optional[str] = None, gnd_file: Optional[str] = None,
                         protocol: str = 'medium', pairs: str = 'auto', bins: int = 200,
                         max_queries: Optional[int] = None, seed: int = 0,
                         chunk_size: int = 1024, energy_dims: Optional[int] = None,
                         log_x: bool = True, progress: bool = True) -> Dict[str, dict]:
    """Analyse the test embeddings of each (model name, results file) of ``models`` (the set
    ``name`` of each file; see :func:`~irtbox.visualization.load_result_set`) and write to
    ``out_dir``: ``energy.png`` (cumulative energy, up to component ``energy_dims``, log2
    axis unless ``log_x=False``), ``similarities.png`` (one panel per model) and
    ``analysis.json`` (the results, by model). ``gnd_file``: a revisited ``gnd_*.pkl``
    whose ``protocol`` gives the pairs (the files then need query flags, not labels); the
    other arguments as in :func:`analyze_embedding_set`. Every file is read before anything
    is written. Returns {model name: analysis}, each with its ``path``."""
    names = [model for model, _ in models]
    if len(set(names)) != len(names):
        raise ValueError(f'model names must be unique, got {names}')
    gnd = load_revisited_gnd(gnd_file, protocol) if gnd_file else None
    need = ('is_query', ) if gnd is not None else ('labels', )
    loaded = [(model, path, load_result_set(path, name, need=need)) for model, path in models]
    results = {}
    for model, path, data in loaded:
        if progress:
            print(f'{model}: {len(data)} descriptors from {path}', flush=True)
        try:
            results[model] = analyze_embedding_set(data, pairs=pairs, bins=bins,
                                                   max_queries=max_queries, seed=seed,
                                                   chunk_size=chunk_size, gnd=gnd,
                                                   progress=progress)
        except ArgumentError as error:  # the argument first (the command's option), then the file
            raise ArgumentError(f'{error.message} ({path})', error.argument,
                                error.value) from error
        except ValueError as error:
            raise ValueError(f'{path}: {error}') from error
        results[model]['path'] = path
    os.makedirs(out_dir, exist_ok=True)
    plot_energy(results, osp.join(out_dir, 'energy.png'), energy_dims, log_x=log_x)
    plot_similarities(results, osp.join(out_dir, 'similarities.png'))
    atomic_write_text(osp.join(out_dir, 'analysis.json'), json.dumps(results, indent=1))
    return results
