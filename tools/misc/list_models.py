"""``python tools/misc/list_models.py --help``: the command :mod:`irtbox.cli.list_models`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.list_models import main

if __name__ == '__main__':
    run(main)
