"""``python tools/analysis_tools/browse_results.py --help``: the command :mod:`irtbox.cli.browse_results`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.browse_results import main

if __name__ == '__main__':
    run(main)
