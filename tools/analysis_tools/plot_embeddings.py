"""``python tools/analysis_tools/plot_embeddings.py --help``: the command :mod:`irtbox.cli.plot_embeddings`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.plot_embeddings import main

if __name__ == '__main__':
    run(main)
