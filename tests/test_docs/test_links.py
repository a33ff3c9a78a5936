"""The documentation stands on its own.

- Every relative link of the repository's markdown (README.md, docs/**, configs/**/README.md,
  tools/**/README.md) names a file or folder of the repository, and a ``#anchor`` names a
  heading of the target page (GitHub's slugs).
- No tracked file points outside the repository: no ``../shared``, no private ``spec/*.md``
  notes, no paper extraction files. Mentions of the method and protocol pages are written with
  their folder (``docs/protocols.md``), so that a reader can find them.

Reads text files only (no import of irtbox): well under a second.
"""
import os
import os.path as osp
import re
import subprocess
import unicodedata

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
THIS = osp.relpath(osp.abspath(__file__), ROOT).replace(os.sep, '/')


TEXT_SUFFIXES = ('.py', '.md', '.sh', '.yml', '.yaml', '.txt', '.cfg', '.ini', '.toml', '.json')


def tracked_files():
    """Repository-relative paths of the tracked files (git), or of every file when git is
    unavailable (e.g. an exported tarball)."""
    try:
        out = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True,
                             check=True, timeout=30).stdout.decode()
        files = [f for f in out.split('\0') if f]
        # Files added to the work tree but not yet committed count as well.
        out = subprocess.run(['git', 'ls-files', '-z', '--others', '--exclude-standard'],
                             cwd=ROOT, capture_output=True, check=True, timeout=30).stdout.decode()
        files += [f for f in out.split('\0') if f]
    except (OSError, subprocess.SubprocessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if not d.startswith('.') and d not in
                           ('work_dirs', 'data', '__pycache__')]
            files += [osp.relpath(osp.join(dirpath, f), ROOT).replace(os.sep, '/')
                      for f in filenames]
    return sorted(f for f in set(files) if osp.isfile(osp.join(ROOT, f)))


FILES = tracked_files()


def is_doc_page(path):
    return (path == 'README.md' or (path.startswith('docs/') and path.endswith('.md'))
            or (path.startswith(('configs/', 'tools/')) and path.endswith('/README.md')))


DOC_PAGES = [f for f in FILES if is_doc_page(f)]


def read(path):
    with open(osp.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


# ------------------------------------------------------------------ markdown parsing

FENCE = re.compile(r'^\s*(```|~~~)')
INLINE_CODE = re.compile(r'(`+)(.+?)\1')
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REF_DEF = re.compile(r'^\s*\[[^\]]+\]:\s*(\S+)')
HTML_LINK = re.compile(r'<(?:a|img)\s[^>]*?(?:href|src)="([^"]+)"', re.IGNORECASE)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks, inline code removed."""
    in_fence = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield lineno, INLINE_CODE.sub('', line)


def links(text):
    """(line number, target) of every link and image of a markdown page."""
    for lineno, line in prose_lines(text):
        for pattern in (LINK, REF_DEF, HTML_LINK):
            for m in pattern.finditer(line):
                yield lineno, m.group(1)


def slugify(heading):
    """GitHub's anchor of a heading: the rendered text, lower case, punctuation dropped
    (letters, digits, '-', '_' and spaces kept), spaces turned into '-'."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)   # links -> their text
    text = re.sub(r'<[^>]+>', '', text)                           # inline html
    text = text.replace('`', '').strip().lower()
    kept = []
    for ch in text:
        if ch in ' -_' or ch.isalnum() or unicodedata.category(ch).startswith('M'):
            kept.append(ch)
    text = ''.join(kept)
    return text.replace(' ', '-')


HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')


def anchors(path):
    """The anchors of a markdown page: its headings' slugs (repeats get -1, -2, ...) and any
    explicit ``<a name=...>`` / ``id=...``."""
    seen, out = {}, set()
    text = read(path)
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = HEADING.match(line)
        if m:
            slug = slugify(m.group(2))
            n = seen.get(slug, 0)
            out.add(slug if n == 0 else f'{slug}-{n}')
            seen[slug] = n + 1
        out.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', line))
    return out


def test_slugify_matches_github():
    assert slugify('Particular objects: SfM-120k → ROxford5k / RParis6k') == \
        'particular-objects-sfm-120k--roxford5k--rparis6k'
    assert slugify("The paper's figures") == 'the-papers-figures'
    assert slugify('Table A6(b) — per training set') == 'table-a6b--per-training-set'
    assert slugify('`map@r`, R-precision and Precision@1') == 'mapr-r-precision-and-precision1'
    assert slugify('Recall@K (leave-one-out)') == 'recallk-leave-one-out'


def test_the_pages_are_found():
    for page in ('README.md', 'docs/README.md', 'docs/protocols.md', 'docs/methods/irt.md',
                 'docs/methods/dtop.md', 'docs/methods/dml_benchmark.md'):
        assert page in DOC_PAGES, f'{page} is missing (or not a documentation page)'


def test_docs_index_lists_every_page():
    index = read('docs/README.md')
    targets = {osp.normpath(osp.join('docs', t.split('#')[0])).replace(os.sep, '/')
               for _, t in links(index)}
    pages = {p for p in DOC_PAGES if p.startswith('docs/') and p != 'docs/README.md'}
    missing = sorted(pages - targets)
    assert not missing, f'docs/README.md does not link to {missing}'


def check_page_links(page):
    problems = []
    here = osp.dirname(page)
    anchor_cache = {}
    for lineno, target in links(read(page)):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.IGNORECASE):   # http:, mailto:, ...
            continue
        path, _, anchor = target.partition('#')
        if path.startswith('/'):
            problems.append(f'{page}:{lineno}: absolute link {target!r} (use a relative one)')
            continue
        resolved = osp.normpath(osp.join(here, path)).replace(os.sep, '/') if path else page
        if resolved.startswith('..'):
            problems.append(f'{page}:{lineno}: {target!r} leaves the repository')
            continue
        full = osp.join(ROOT, resolved)
        if not osp.exists(full):
            problems.append(f'{page}:{lineno}: {target!r} -> {resolved} does not exist')
            continue
        if anchor:
            if not resolved.endswith('.md'):
                problems.append(f'{page}:{lineno}: {target!r} has an anchor but is not markdown')
                continue
            if resolved not in anchor_cache:
                anchor_cache[resolved] = anchors(resolved)
            if anchor not in anchor_cache[resolved]:
                problems.append(f'{page}:{lineno}: no heading #{anchor} in {resolved}')
    return problems


@pytest.mark.parametrize('page', DOC_PAGES)
def test_relative_links_resolve(page):
    problems = check_page_links(page)
    assert not problems, '\n'.join(problems)


# ------------------------------------------------------------------ nothing outside the repo

_S = 'spec'  # split so that this file does not match its own patterns
OUTSIDE = re.compile(
    r'\.\./shared|/work/shared|shared/' + _S + r'|\b' + _S + r'/\w+\.md'
    r'|\.\./papers/|\b\d{3}_[0-9a-f]{16}\.txt')
# A page of docs/ named without its folder (e.g. a docstring saying "see protocols.md").
BARE_NAME = re.compile(r'(?<![\w/.-])(protocols|design|dml_benchmark|irt|dtop)\.md\b')


def text_files():
    return [f for f in FILES if f.endswith(TEXT_SUFFIXES) and f != THIS]


@pytest.mark.slow
def test_no_file_points_outside_the_repository():
    problems = []
    for path in text_files():
        for lineno, line in enumerate(read(path).splitlines(), 1):
            m = OUTSIDE.search(line)
            if m:
                problems.append(f'{path}:{lineno}: {m.group(0)!r} is not part of the repository')
    assert not problems, '\n'.join(problems)


PAGE_OF = {'protocols': 'docs/protocols.md', 'irt': 'docs/methods/irt.md',
           'dtop': 'docs/methods/dtop.md', 'dml_benchmark': 'docs/methods/dml_benchmark.md',
           'design': 'docs/architecture.md'}


def lines_to_scan(path):
    """(line number, text) of a file; for markdown the lines outside fenced code blocks (a
    folder listing may name files bare) with link targets removed (those are resolved by
    test_relative_links_resolve)."""
    text = read(path)
    if not path.endswith('.md'):
        yield from enumerate(text.splitlines(), 1)
        return
    in_fence = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            yield lineno, LINK.sub('', line)


@pytest.mark.slow
def test_pages_are_named_with_their_folder():
    problems = []
    for path in text_files():
        for lineno, line in lines_to_scan(path):
            m = BARE_NAME.search(line)
            if m:
                problems.append(f'{path}:{lineno}: {m.group(0)!r}; write '
                                f'{PAGE_OF[m.group(1)]} so that readers find it')
    assert not problems, '\n'.join(problems)
