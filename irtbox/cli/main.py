"""The ``irtbox`` command: ``irtbox COMMAND [ARGS ...]`` runs the same function as the script
``tools/<...>.py`` of that command (``irtbox COMMAND --help`` shows its options).

Examples:
  irtbox list-models
  irtbox prepare-digits --out data/digits
  irtbox prepare cub --root data/cub && irtbox check cub --root data/cub
  irtbox train configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py
  irtbox test CONFIG CKPT --out work_dirs/results.npz
  irtbox search build CONFIG CKPT photos/ photos_index
"""
import argparse
import importlib
import sys
from typing import Optional, Sequence

from irtbox.cli import command_parser

__all__ = ['COMMANDS', 'main', 'console']

# command -> (module of irtbox.cli, what it does)
COMMANDS = {
    'train': ('train', 'train a model from a config'),
    'test': ('test', "evaluate a model on its config's test sets"),
    'extract': ('extract', 'embed a folder of images (resumable shards)'),
    'search': ('search', 'build an index of a folder, query it, serve it'),
    'export': ('export', 'export a model to ONNX / TorchScript, numerically checked'),
    'list-models': ('list_models', 'list the model zoo'),
    'publish': ('publish_model', 'publish a checkpoint into a model zoo folder'),
    'prepare-digits': ('prepare_digits', "write scikit-learn's digits as a retrieval dataset"),
    'prepare': ('prepare', 'download, verify and lay out a published dataset'),
    'check': ('check', 'check a prepared dataset (files, images, counts), or train/test overlap'),
    'sweep': ('sweep', 'run, collect and plot a grid of trainings'),
    'rehearse': ('rehearse', "rehearse a config's real run in miniature"),
    'browse-results': ('browse_results', 'result grids and an HTML browser from a results file'),
    'plot-embeddings': ('plot_embeddings', "a 2-D map of a results file's embeddings"),
    'analyze-embeddings': ('analyze_embeddings', 'descriptor analyses of results files'),
    'plot-gradient-noise': ('plot_gradient_noise', 'gradient noise against the margin'),
    'plot-sweep': ('plot_sweep', "a sweep's figures from its summary table"),
}


def _parser() -> argparse.ArgumentParser:
    from irtbox import __version__
    width = max(len(name) for name in COMMANDS)
    listing = '\n'.join(f'  {name.ljust(width)}  {what}' for name, (_, what) in COMMANDS.items())
    parser = command_parser('irtbox: image retrieval with vision transformers.',
                            f'commands:\n{listing}\n\n{__doc__}', prog='irtbox')
    parser.add_argument('--version', action='version', version=f'irtbox {__version__}')
    parser.add_argument('command', choices=sorted(COMMANDS), metavar='COMMAND',
                        help='one of the commands below')
    parser.add_argument('args', nargs=argparse.REMAINDER, help="the command's arguments")
    return parser


def main(argv: Optional[Sequence[str]] = None):
    """Parse ``irtbox COMMAND ARGS`` and run the command's ``main(ARGS)`` as its script does
    (:func:`irtbox.cli.run`); returns what the command returns."""
    from irtbox.cli import run
    from irtbox.utils.exit_status import exit_with_parent_if_asked
    exit_with_parent_if_asked()  # a phase of rehearse, a run of a sweep: end with it
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    module = importlib.import_module(f'irtbox.cli.{COMMANDS[args.command][0]}')
    # The command's parser names itself after sys.argv[0]: 'irtbox COMMAND' in its usage.
    program, sys.argv[0] = sys.argv[0], f'irtbox {args.command}'
    try:
        return run(module.main, args.args)
    finally:
        sys.argv[0] = program


def console() -> None:
    """The installed ``irtbox`` script: :func:`main`, whose result is not the exit status (the
    script's wrapper would print it and exit 1)."""
    main()
