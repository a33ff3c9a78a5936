"""``python tools/analysis_tools/analyze_embeddings.py --help``: the command :mod:`irtbox.cli.analyze_embeddings`, run as an OpenMMLab-style script."""
from irtbox.cli import run
from irtbox.cli.analyze_embeddings import main

if __name__ == '__main__':
    run(main)
