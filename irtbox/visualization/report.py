"""The whole picture of one evaluation: sampled queries -> PNG grids, index.html, failures.csv."""
import csv
import os.path as osp
from functools import lru_cache
from typing import Dict, List, Optional, Sequence

import numpy as np

from irtbox.utils.fileio import atomic_write

from .grid import draw_result_grid, load_tile, save_image
from .html_browser import label_name, worst_queries, write_results_browser
from .ranking import analyze_queries, label_ground_truth, select_queries, top1_failures

__all__ = ['show_results', 'write_failures_csv']

POOL_FACTOR, MIN_POOL = 10, 500


def show_results(out_dir: str, embeddings: np.ndarray, image_paths: Sequence[str],
                 is_query: Optional[np.ndarray] = None, labels: Optional[np.ndarray] = None,
                 gnd: Optional[Sequence[dict]] = None,
                 class_names: Optional[Sequence[str]] = None,
                 metrics: Optional[Dict[str, float]] = None, num: int = 50, k: int = 8,
                 seed: int = 0, worst: int = 0, tile: int = 128,
                 progress: bool = True) -> List[dict]:
    """Draws a sample of queries and their top-k into ``out_dir``.

    Writes ``grids/query_<sample>.png`` (one per shown query), ``index.html`` (the
    browser, with ``thumbs/``) and ``failures.csv`` (the shown queries, worst AP first).

    The queries are the samples with ``is_query`` True, searched in the others; when
    none is (leave-one-out), every sample queries all the others. ``num`` of them are
    shown, chosen with ``seed``: a random pool of max(10 num, 500) queries is screened for
    top-1 failures, then up to half of the sample are failures of the pool
    (:func:`~irtbox.visualization.ranking.select_queries`).

    With ``worst`` > 0, every query is ranked in full instead (the cost of ``map@all``) and
    the ``worst`` queries by AP are shown; ``failures.csv`` then lists all queries.

    ``labels`` (n,) tell correct results from wrong ones, or else ``gnd``: one ``{'ok', 'junk'}``
    dict per query (gallery positions among the non-queries), as for revisited Oxford / Paris.
    ``metrics`` go to the page header; ``tile`` is a grid tile's side in pixels.

    Returns:
        The shown queries' records (see :func:`~irtbox.visualization.ranking.analyze_queries`) with
        ``query`` and ``results`` as sample indices.
    """
    from tqdm import tqdm
    n = len(embeddings)
    if len(image_paths) != n:
        raise ValueError(f'show_results: {len(image_paths)} image paths for {n} embeddings; '
                         'expected one per sample.')
    is_query = np.zeros(n, dtype=bool) if is_query is None else np.asarray(is_query, bool)
    leave_one_out = not is_query.any()
    q_ids = np.arange(n) if leave_one_out else np.flatnonzero(is_query)
    g_ids = np.arange(n) if leave_one_out else np.flatnonzero(~is_query)
    if len(g_ids) == 0:
        raise ValueError('show_results: every sample is a query, so the gallery is empty.')
    if gnd is not None:
        if len(gnd) != len(q_ids):
            raise ValueError(f'show_results: gnd has {len(gnd)} entries for {len(q_ids)} '
                             'queries; expected one per query.')

        def gnd_of(rows):
            return [gnd[r] for r in rows]
    elif labels is not None:
        labels = np.asarray(labels)

        def gnd_of(rows):
            return label_ground_truth(labels[q_ids], labels[g_ids], rows,
                                      exclude_self=leave_one_out)
    else:
        raise ValueError('show_results: neither labels nor gnd given; expected one of them '
                         'to tell correct results from wrong ones.')
    q_emb, g_emb = embeddings[q_ids], embeddings[g_ids]
    gallery_labels = None if labels is None else labels[g_ids]
    if worst > 0:
        rows = np.arange(len(q_ids))
    else:
        # Failures are screened in a random pool (POOL_FACTOR x num queries), not in all
        # queries: the cost follows what is drawn (a 10k-query test set costs no more).
        pool = select_queries(len(q_ids), max(POOL_FACTOR * num, MIN_POOL), seed=seed)
        failures = top1_failures(q_emb, g_emb, pool, gnd_of, exclude_self=leave_one_out)
        rows = pool[select_queries(len(pool), num, failures, seed)]
    analyzed = []
    for start in tqdm(range(0, len(rows), 1024), desc='ranking all queries', unit='chunk',
                      disable=not progress or worst <= 0):
        chunk = rows[start:start + 1024]
        analyzed += analyze_queries(q_emb, g_emb, chunk, gnd_of(chunk), k=k,
                                    gallery_labels=gallery_labels, exclude_self=leave_one_out)
    for rec in analyzed:  # query rows and gallery positions -> sample indices
        rec['query'] = int(q_ids[rec['query']])
        rec['results'] = g_ids[rec['results']]
    records = analyzed
    if worst > 0:
        records = sorted(worst_queries(analyzed, worst), key=lambda r: r['query'])
    _draw(out_dir, records, image_paths, labels, class_names, metrics, tile, progress)
    write_failures_csv(osp.join(out_dir, 'failures.csv'), analyzed, image_paths, labels,
                       class_names)
    return records


def _draw(out_dir, records, image_paths, labels, class_names, metrics, tile, progress) -> None:
    """The grids of ``records`` and the browser that links them."""
    from tqdm import tqdm
    tile_of = lru_cache(maxsize=4096)(lambda i: load_tile(image_paths[i], tile))
    grid_files = {}
    for rec in tqdm(records, desc='result grids', unit='query', disable=not progress):
        q = rec['query']
        name = '' if labels is None else label_name(labels[q].item(), class_names) + ' · '
        ap = 'n/a' if rec['ap'] != rec['ap'] else f"{rec['ap']:.3f}"
        first = f"#{rec['first_correct']}" if rec['first_correct'] else 'none'
        title = f"query {q} · {name}AP {ap} · R {rec['n_relevant']} · first correct {first}"
        grid = draw_result_grid(tile_of(q), [tile_of(int(i)) for i in rec['results']],
                                rec['status'], rec['scores'], title=title)
        grid_files[q] = osp.join(out_dir, 'grids', f'query_{q}.png')
        save_image(grid, grid_files[q])
    write_results_browser(out_dir, records, image_paths, labels=labels, class_names=class_names,
                          metrics=metrics, grid_files=grid_files, progress=progress)


def write_failures_csv(path: str, records: Sequence[dict], image_paths: Sequence[str],
                       labels: Optional[np.ndarray] = None,
                       class_names: Optional[Sequence[str]] = None) -> None:
    """One line per query, worst AP first: query (sample index), image, label, ap,
    n_relevant (R), first_correct (1-based rank, empty if none), failure (0/1) and
    confusions ('class:count;...', the wrong classes ranked before the first correct
    result). Written atomically."""
    def write(tmp: str) -> None:
        with open(tmp, 'w', newline='', encoding='utf-8') as f:
            writer = csv.writer(f)
            writer.writerow(['query', 'image', 'label', 'ap', 'n_relevant', 'first_correct',
                             'failure', 'confusions'])
            for rec in worst_queries(records):
                q = rec['query']
                writer.writerow([
                    q, image_paths[q], '' if labels is None else label_name(labels[q].item(),
                                                                             class_names),
                    '' if rec['ap'] != rec['ap'] else f"{rec['ap']:.6f}", rec['n_relevant'],
                    rec['first_correct'] or '', int(rec['failure']),
                    ';'.join(f'{label_name(c, class_names)}:{n}' for c, n in rec['confusions'])])
    atomic_write(path, write)
