"""``python tools/dataset_converters/prepare_digits.py --help``: the command :mod:`irtbox.cli.prepare_digits`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.prepare_digits import main

if __name__ == '__main__':
    run(main)
