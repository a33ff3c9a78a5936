"""A static results browser: ``index.html`` with one row per query, thumbnails beside it.

The page is self-contained (inline CSS and JavaScript, no CDN), so it works from ``file://`` with no
server and no internet. Thumbnails are small JPEG files written once per image
(``thumbs/<sample>.jpg``) and loaded lazily, so a page of thousands of queries stays light.
"""
import html
import math
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence
from urllib.parse import quote

from irtbox.utils.fileio import atomic_write_text

from .grid import COLORS, load_tile, save_image

__all__ = ['write_results_browser', 'worst_queries', 'label_name']


def worst_queries(records: Sequence[dict], num: Optional[int] = None) -> List[dict]:
    """The records with the lowest AP first (ties: the later first correct result first;
    queries without any correct item, AP NaN, come first of all)."""
    def key(r):
        no_positive = r['ap'] != r['ap']
        return (not no_positive, 0.0 if no_positive else r['ap'],
                -(r['first_correct'] or math.inf), r['query'])
    return sorted(records, key=key)[:num]


def _link(out_dir: str, path: str) -> str:
    """A URL from ``out_dir/index.html`` to ``path`` (relative, so it works from file://)."""
    rel = osp.relpath(osp.abspath(path), osp.abspath(out_dir))
    return quote(rel.replace(os.sep, '/'))


def label_name(label, class_names: Optional[Sequence[str]]) -> str:
    """The name of ``label`` in ``class_names`` when there is one, else the label as text."""
    if class_names is not None and isinstance(label, int) and 0 <= label < len(class_names):
        return str(class_names[label])
    return str(label)


def _row_html(rec: dict, out_dir: str, image_paths: Sequence[str], labels, class_names,
              grid_file: Optional[str]) -> str:
    q = rec['query']
    ap = rec['ap']
    label = None if labels is None else labels[q].item()
    confusions = ', '.join(f'{label_name(c, class_names)} ({n})' for c, n in rec['confusions'])
    facts = [f'AP {ap:.3f}' if ap == ap else 'AP n/a (no correct item)',
             f"R {rec['n_relevant']}",
             f"first correct #{rec['first_correct']}" if rec['first_correct'] else
             'no correct result']
    if confusions:
        facts.append('before it: ' + confusions)
    if grid_file:
        facts.append(f'<a href="{_link(out_dir, grid_file)}">grid</a>')
    hits = []
    for rank, (i, status, score) in enumerate(
            zip(rec['results'], rec['status'], rec['scores']), start=1):
        i = int(i)
        title = f'#{rank} {status} {score:.3f}'
        if labels is not None:
            title += ' · ' + label_name(labels[i].item(), class_names)
        hits.append(f'<a class="hit {status}" href="{_link(out_dir, image_paths[i])}" '
                    f'title="{html.escape(title)}"><img loading="lazy" src="thumbs/{i}.jpg" '
                    f'alt="result {rank}"><span>#{rank} {score:.2f}</span></a>')
    caption = '' if label is None else html.escape(label_name(label, class_names))
    return (f'<div class="row" id="q{q}" data-ap="{ap if ap == ap else ""}" '
            f'data-failure="{int(rec["failure"])}" data-order="{q}">'
            f'<a class="hit query" href="{_link(out_dir, image_paths[q])}">'
            f'<img loading="lazy" src="thumbs/{q}.jpg" alt="query {q}">'
            f'<span>query {q}</span></a>'
            f'<div class="facts"><b>{caption}</b><br>'
            + '<br>'.join(html.escape(f) if not f.startswith('<a') else f for f in facts)
            + '</div><div class="hits">' + ''.join(hits) + '</div></div>')


def write_results_browser(out_dir: str, records: Sequence[dict], image_paths: Sequence[str],
                          labels=None, class_names: Optional[Sequence[str]] = None,
                          metrics: Optional[Dict[str, float]] = None,
                          grid_files: Optional[Dict[int, str]] = None,
                          title: str = 'Retrieval results', worst: int = 10,
                          thumb_size: int = 96, progress: bool = True) -> str:
    """Writes ``out_dir/index.html`` (and its thumbnails); returns its path.

    ``records``: per-query dicts as from :func:`~irtbox.visualization.ranking.analyze_queries`,
    ``query`` and ``results`` as indices into ``image_paths`` (absolute or relative to the
    working directory). ``labels`` / ``class_names`` name the classes shown; ``metrics`` go to
    the header, with the ``worst`` queries; ``grid_files``: {query sample: PNG path} for the
    "grid" links; ``thumb_size``: the thumbnails' maximum side in pixels.
    """
    from tqdm import tqdm
    # One thumbnail per distinct sample (a gallery image shown for many queries is written
    # once); existing ones are rewritten: an earlier report in the same folder may have had
    # other images under the same numbers.
    todo = sorted({int(i) for r in records for i in [r['query'], *r['results']]})
    for i in tqdm(todo, desc='thumbnails', unit='img', disable=not progress or not todo):
        save_image(load_tile(image_paths[i], thumb_size),
                   osp.join(out_dir, 'thumbs', f'{i}.jpg'), quality=85)
    rows = [_row_html(r, out_dir, image_paths, labels, class_names, (grid_files or {}).get(
        r['query'])) for r in records]
    summary = ' · '.join(f'{html.escape(k)} {v:.4g}' for k, v in (metrics or {}).items())
    worst_items = ''.join(
        f'<li><a href="#q{r["query"]}">query {r["query"]}</a>: AP '
        f'{"n/a" if r["ap"] != r["ap"] else format(r["ap"], ".3f")}, R {r["n_relevant"]}, '
        f'first correct {"#" + str(r["first_correct"]) if r["first_correct"] else "none"}</li>'
        for r in worst_queries(records, worst))
    n_fail = sum(bool(r['failure']) for r in records)
    page = _PAGE.format(
        title=html.escape(title), summary=summary, n=len(records), n_fail=n_fail,
        worst=worst_items, rows='\n'.join(rows),
        css=_CSS % {k: 'rgb%s' % (v, ) for k, v in COLORS.items()},
        js=_JS, legend=', '.join(f'<span style="color:rgb{v}">&#9632; {k}</span>'
                                 for k, v in COLORS.items()))
    path = osp.join(out_dir, 'index.html')
    atomic_write_text(path, page)
    return path


_CSS = """
body { font: 13px sans-serif; margin: 12px; }
header { position: sticky; top: 0; background: #fff; padding: 4px 0; border-bottom: 1px solid #ccc; }
.row { display: flex; align-items: flex-start; gap: 10px; padding: 6px 0;
       border-bottom: 1px solid #eee; }
.row[hidden] { display: none; }
.facts { width: 200px; flex: none; }
.hits { display: flex; flex-wrap: wrap; gap: 6px; }
.hit { display: flex; flex-direction: column; align-items: center; text-decoration: none;
       color: #000; font-size: 11px; }
.hit img { width: 96px; height: 96px; object-fit: contain; border: 4px solid; }
.hit.correct img { border-color: %(correct)s; }
.hit.wrong img { border-color: %(wrong)s; }
.hit.junk img { border-color: %(junk)s; }
.hit.query img { border-color: %(query)s; }
details { margin: 4px 0; }
"""

_JS = """
const list = document.getElementById('rows');
const rows = Array.from(list.children);
const sortBy = document.getElementById('sort');
const failuresOnly = document.getElementById('failures-only');
function apOf(row) {  // a query without any correct item (no AP) counts as the worst
  return row.dataset.ap === '' ? -1 : parseFloat(row.dataset.ap);
}
function update() {
  const mode = sortBy.value;
  const sorted = rows.slice().sort((a, b) => {
    const byIndex = a.dataset.order - b.dataset.order;
    if (mode === 'order') return byIndex;
    const x = apOf(a), y = apOf(b);
    return (mode === 'ap-asc' ? x - y : y - x) || byIndex;
  });
  let shown = 0;
  for (const row of sorted) {
    row.hidden = failuresOnly.checked && row.dataset.failure !== '1';
    shown += !row.hidden;
    list.appendChild(row);
  }
  document.getElementById('shown').textContent = shown;
}
sortBy.addEventListener('change', update);
failuresOnly.addEventListener('change', update);
update();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{css}</style></head>
<body>
<header>
<h2>{title}</h2>
<div id="summary">{summary}</div>
<div>{n} queries shown, {n_fail} failures (a wrong result ranks before the first correct one;
junk is skipped). Showing <span id="shown">{n}</span>.
<label>Sort by <select id="sort">
<option value="ap-asc">AP, worst first</option>
<option value="ap-desc">AP, best first</option>
<option value="order">query index</option>
</select></label>
<label><input type="checkbox" id="failures-only"> failures only</label></div>
<details><summary>Worst queries by AP</summary><ol>{worst}</ol></details>
<div>Frames: {legend}. Click a thumbnail for the full image.</div>
</header>
<div id="rows">
{rows}
</div>
<script>{js}</script>
</body></html>
"""
