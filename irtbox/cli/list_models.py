"""List the models of the zoo: name, whether weights can be loaded, embedding size, config.

Examples:
  python tools/misc/list_models.py                     # every model
  python tools/misc/list_models.py 'irt-r_*sop'        # shell-style wildcard (or a substring)
  python tools/misc/list_models.py --with-weights      # only those get_model(name) can load
  python tools/misc/list_models.py --index zoo/model-index.yml --format json
  IRTBOX_MODEL_INDEX=zoo/model-index.yml python tools/misc/list_models.py

Weights column: "released" (downloaded and sha256-checked by get_model), "timm" (the
backbone's public pretrained weights, loaded by timm), "-" (not released: train it).
Result column: the entry's first result, "(paper)" when it is the number the paper reports,
"(these weights)" when it was measured with the entry's weights.
"""
import csv
import json
import os.path as osp
import re
import sys

from irtbox.cli import command_parser

__all__ = ['parse_args', 'main']


COLUMNS = ('name', 'weights', 'dim', 'result', 'config')


def parse_args(argv=None):
    parser = command_parser('List the irtbox model zoo.', __doc__)
    parser.add_argument('pattern', nargs='?', help='wildcard or substring of the model names')
    weights = parser.add_mutually_exclusive_group()
    weights.add_argument('--with-weights', dest='with_weights', action='store_const', const=True,
                         help='only models whose weights get_model can load')
    weights.add_argument('--without-weights', dest='with_weights', action='store_const',
                         const=False, help='only models without released weights')
    parser.add_argument('--index', action='append', help='an extra index file (repeatable)')
    parser.add_argument('--format', choices=['table', 'csv', 'json'], default='table')
    return parser.parse_args(argv)


def first_result(entry) -> str:
    """The entry's first result and whose it is: the paper's (``Source: paper, ...``), or
    measured with these weights."""
    for result in entry.results:
        whose = 'paper' if str(result.get('Source', '')).startswith('paper') else 'these weights'
        for metric, value in (result.get('Metrics') or {}).items():
            return f'{result.get("Dataset", "")} {metric} {value} ({whose})'.strip()
    return ''


def embedding_dim(entry) -> str:
    """The weights' embedding dimension, else the one the entry's descriptor names ("CLS
    token, 384-d"); '' when neither says."""
    dim = (entry.weights or {}).get('embedding_dim')
    if dim:
        return str(dim)
    named = re.search(r'\b(\d+)-d\b', str((entry.metadata or {}).get('Descriptor', '')))
    return named.group(1) if named else ''


def rows(names, entries):
    from irtbox.apis.model_zoo import ROOT
    out = []
    for name in names:
        entry = entries[name]
        config = osp.relpath(entry.config, ROOT) if entry.config.startswith(ROOT) else entry.config
        out.append(dict(name=name, weights='-' if entry.weights is None else entry.status,
                        dim=embedding_dim(entry), result=first_result(entry), config=config))
    return out


def main(argv=None):
    args = parse_args(argv)
    from irtbox.apis.model_zoo import list_models, load_model_index
    try:
        entries = load_model_index(args.index)
        names = list_models(args.pattern, args.with_weights, args.index)
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f'list_models: {err}')
    table = rows(names, entries)
    if args.format == 'json':
        print(json.dumps(table, indent=2))
    elif args.format == 'csv':
        writer = csv.DictWriter(sys.stdout, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(table)
    else:
        widths = {c: max([len(c)] + [len(r[c]) for r in table]) for c in COLUMNS}
        print('  '.join(c.upper().ljust(widths[c]) for c in COLUMNS).rstrip())
        for row in table:
            print('  '.join(row[c].ljust(widths[c]) for c in COLUMNS).rstrip())
        print(f'{len(table)} of {len(entries)} models')
    return table
