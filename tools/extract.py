"""``python tools/extract.py --help``: the command :mod:`irtbox.cli.extract`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.extract import main

if __name__ == '__main__':
    run(main)
