"""``python tools/test.py --help``: the command :mod:`irtbox.cli.test`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.test import main

if __name__ == '__main__':
    run(main)
