"""``python tools/dataset_converters/prepare.py --help``: the command :mod:`irtbox.cli.prepare`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.prepare import main

if __name__ == '__main__':
    run(main)
