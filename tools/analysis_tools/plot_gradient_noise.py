"""``python tools/analysis_tools/plot_gradient_noise.py --help``: the command :mod:`irtbox.cli.plot_gradient_noise`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.plot_gradient_noise import main

if __name__ == '__main__':
    run(main)
