"""``python tools/dataset_converters/check.py --help``: the command :mod:`irtbox.cli.check`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.check import main

if __name__ == '__main__':
    run(main)
