"""Query results as a static HTML page (thumbnails are the image files themselves)."""
import html
import os.path as osp
from typing import List
from urllib.request import pathname2url

from irtbox.utils.fileio import atomic_write_text

__all__ = ['write_results_html', 'hit_caption']


def _src(path: str) -> str:
    return 'file:' + pathname2url(osp.abspath(path))


def hit_caption(item: str) -> str:
    """A hit's file name with its folder (in a class-per-folder collection, its class), so
    that a wrong hit shows what it is."""
    parent = osp.basename(osp.dirname(item))
    return f'{parent}/{osp.basename(item)}' if parent else osp.basename(item)


def write_results_html(path: str, results: List[dict]) -> None:
    """One row per query: the query image, then its hits with rank and score. ``results``:
    ``[{'query': path, 'hits': [{'rank', 'id', 'score', 'path'}, ...]}, ...]`` (``path``: the hit's
    file, default its id; relative paths are relative to the working directory). Each caption shows
    the file's folder and name (in a folder per class: the class). Written whole or not at all
    (:func:`~irtbox.utils.fileio.atomic_write_text`)."""
    rows = []
    for result in results:
        cells = [f'<figure class="query"><img src="{html.escape(_src(result["query"]))}">'
                 f'<figcaption>query<br>{html.escape(hit_caption(result["query"]))}'
                 '</figcaption></figure>']
        for hit in result['hits']:
            file = hit.get('path', hit['id'])
            cells.append(f'<figure title="{html.escape(file)}"><img src="'
                         f'{html.escape(_src(file))}" loading="lazy"><figcaption>'
                         f'#{hit["rank"]} {hit["score"]:.3f}<br>'
                         f'{html.escape(hit_caption(hit["id"]))}</figcaption></figure>')
        rows.append('<div class="row">' + ''.join(cells) + '</div>')
    atomic_write_text(path, '<!DOCTYPE html><html><head><meta charset="utf-8"><title>irtbox '
                      'search results</title><style>body{font-family:sans-serif}.row{display:'
                      'flex;gap:8px;margin-bottom:12px}figure{margin:0;width:120px;font-size:'
                      '11px}img{width:120px;height:120px;object-fit:contain;background:#eee}'
                      '.query img{outline:3px solid #1565c0}</style></head><body>'
                      + ''.join(rows) + '</body></html>')
