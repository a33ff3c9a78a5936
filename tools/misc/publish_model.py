"""``python tools/misc/publish_model.py --help``: the command :mod:`irtbox.cli.publish_model`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.publish_model import main

if __name__ == '__main__':
    run(main)
