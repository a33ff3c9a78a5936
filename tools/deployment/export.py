"""``python tools/deployment/export.py --help``: the command :mod:`irtbox.cli.export`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.export import main

if __name__ == '__main__':
    run(main)
