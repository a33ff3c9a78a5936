"""``python tools/sweep.py --help``: the command :mod:`irtbox.cli.sweep`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.sweep import main

if __name__ == '__main__':
    run(main)
