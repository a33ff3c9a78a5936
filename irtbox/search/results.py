"""Query results as a static HTML page (thumbnails are the image files themselves)."""
import html
import os.path as osp
from typing import List
from urllib.request import pathname2url

from irtbox.utils.fileio import atomic_write_text

__all__ = ['write_results_html']


def _src(path: str) -> str:
    return 'file:' + pathname2url(osp.abspath(path))


def write_results_html(path: str, results: List[dict]) -> None:
    """One row per query: the query image, then its hits with rank and score.

    ``results``: ``[{'query': path, 'hits': [{'rank', 'id', 'score'}, ...]}, ...]``. Written
    whole or not at all (:func:`~irtbox.utils.fileio.atomic_write_text`).
    """
    rows = []
    for result in results:
        cells = [f'<figure class="query"><img src="{html.escape(_src(result["query"]))}">'
                 f'<figcaption>query<br>{html.escape(osp.basename(result["query"]))}'
                 '</figcaption></figure>']
        for hit in result['hits']:
            cells.append(f'<figure title="{html.escape(hit["id"])}"><img src="'
                         f'{html.escape(_src(hit["id"]))}" loading="lazy"><figcaption>'
                         f'#{hit["rank"]} {hit["score"]:.3f}<br>'
                         f'{html.escape(osp.basename(hit["id"]))}</figcaption></figure>')
        rows.append('<div class="row">' + ''.join(cells) + '</div>')
    atomic_write_text(path, '<!DOCTYPE html><html><head><meta charset="utf-8"><title>irtbox '
                      'search results</title><style>body{font-family:sans-serif}.row{display:'
                      'flex;gap:8px;margin-bottom:12px}figure{margin:0;width:120px;font-size:'
                      '11px}img{width:120px;height:120px;object-fit:contain;background:#eee}'
                      '.query img{outline:3px solid #1565c0}</style></head><body>'
                      + ''.join(rows) + '</body></html>')
