"""``python tools/analysis_tools/plot_sweep.py --help``: the command :mod:`irtbox.cli.plot_sweep`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.plot_sweep import main

if __name__ == '__main__':
    run(main)
