"""``python tools/misc/rehearse.py --help``: the command :mod:`irtbox.cli.rehearse`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.rehearse import main

if __name__ == '__main__':
    run(main)
