"""Download, verify, unpack and lay out a published dataset in the layout its configs read
(docs/datasets.md). A rerun skips finished steps; a cut download resumes.

Examples:
  irtbox prepare                                  # the datasets, sizes, how each is obtained
  irtbox prepare cub --root data/cub
  irtbox prepare roxford5k --mirror https://mirror.example.org/datasets
  irtbox prepare inshop --from-dir ~/Downloads/inshop   # files behind a form, fetched by hand
"""

from irtbox.cli import command_parser, worded
from irtbox.cli.prechecks import prepare_command  # noqa: F401  (its home before)
from irtbox.datasets import dataset_spec, dataset_specs
from irtbox.ops.prepare import PrepareError, prepare_dataset
from irtbox.utils.checks import int_argument
from irtbox.utils.download import DownloadError, UnreachableError

__all__ = ['parse_args', 'main', 'listing', 'prepare_command']


def _size(num_bytes: int) -> str:
    """'2.9 GB', '120 GB' from 10 GB on, or '6 MB' below a GB (where '0.0 GB' would say
    nothing); docs/datasets.md's table gives the same (tests/test_docs/test_dataset_sizes.py)."""
    if num_bytes < 1e9:
        return f'{num_bytes / 1e6:.0f} MB'
    return f'{num_bytes / 1e9:.{0 if num_bytes >= 1e10 else 1}f} GB'


def listing() -> str:
    """One line per dataset: name, download size, where it goes, how it is obtained (with
    the size of the images a user fetches into a folder, where the dataset has one)."""
    rows = []
    for info in dataset_specs(preparable=True).values():
        how = '--from-dir (form or terms)' if info.manual else 'downloaded'
        fetched = sum(f.unpacked for f in info.files if f.folder)
        if fetched:
            how = f'{how[:-1]}; images you fetch: ~{_size(fetched)})'
        rows.append(f'  {info.name:<12} {_size(info.download_bytes):>8}  '
                    f'{info.default_root:<18} {how}  {info.title}')
    return '\n'.join(rows)


def parse_args(argv=None):
    parser = command_parser(__doc__, f'datasets:\n{listing()}')
    names = list(dataset_specs(preparable=True))
    parser.add_argument('name', nargs='?', metavar='NAME', choices=names,
                        help=f'the dataset, one of {", ".join(names)}; none: list them')
    parser.add_argument('--root', help='the dataset folder (default: data/<name>, what the '
                        'configs read)')
    parser.add_argument('--mirror', metavar='BASE_URL', help='fetch every file from '
                        'BASE_URL/<name>/<file name> instead of its official address')
    parser.add_argument('--from-dir', metavar='DIR', help='read the files from DIR (fetched '
                        'by hand, under their official names) instead of downloading them')
    parser.add_argument('--keep-archives', action='store_true', help='keep the downloaded '
                        'archives under ROOT/downloads after unpacking')
    parser.add_argument('--no-space-check', action='store_true', help='start even when the '
                        'free disk space looks too small')
    parser.add_argument('--retries', type=int_argument(0), default=3,
                        help='resumes of a cut download within this run (default 3)')
    parser.add_argument('--no-progress', action='store_true', help='no progress bars')
    args = parser.parse_args(argv)
    if args.mirror and args.from_dir:
        parser.error('--mirror and --from-dir are two sources; give one')
    return args


# The flag that passes check_space=False (a remedy of PrepareError).
_FLAGS = dict(check_space='--no-space-check')


def main(argv=None):
    args = parse_args(argv)
    if args.name is None:
        print(f'datasets (irtbox prepare NAME):\n{listing()}')
        return None
    info = dataset_spec(args.name, preparable=True)
    try:
        root = args.root or info.default_root
        manifest = prepare_dataset(info, root, mirror=args.mirror, from_dir=args.from_dir,
                                   keep_archives=args.keep_archives,
                                   check_space=not args.no_space_check,
                                   progress=not args.no_progress, retries=args.retries)
    except UnreachableError as err:
        raise SystemExit(f'prepare {args.name}: {err}. Without a network: --from-dir DIR (the '
                         'files fetched elsewhere, under their names) or --mirror URL (a server '
                         'you can reach that holds them)') from err
    except (PrepareError, DownloadError, OSError) as err:
        raise SystemExit(f'prepare {args.name}: {worded(err, _FLAGS)}') from err
    print(f'check it with: irtbox check {args.name} --root {root}')
    return manifest
