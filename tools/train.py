"""``python tools/train.py --help``: the command :mod:`irtbox.cli.train`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.train import main

if __name__ == '__main__':
    run(main)
