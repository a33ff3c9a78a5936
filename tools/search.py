"""``python tools/search.py --help``: the command :mod:`irtbox.cli.search`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.search import main

if __name__ == '__main__':
    run(main)
