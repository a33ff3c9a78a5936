"""The command line: one module per command, each with ``parse_args(argv)`` and ``main(argv)``
that parses its arguments and calls the package (``irtbox.apis``, ``irtbox.search``, ...).

This is the only layer that decides how a process ends: :func:`run` is what the scripts under
``tools/`` call. The library below never exits the process.
"""
import argparse
import ast
import os
import os.path as osp
import re
import sys
from typing import Callable, Dict, Optional, Sequence

from irtbox.utils.errors import IrtboxError
from irtbox.utils.exit_status import PREEMPTED_EXIT_STATUS
from irtbox.utils.terminal import VERBOSE_VAR

__all__ = ['run', 'checkpoint_argument', 'worded', 'module_doc', 'DEBUG_VAR', 'HelpFormatter',
           'RESULTS_FLAGS', 'command_parser', 'add_cfg_options', 'add_verbose_argument']

#: ``IRTBOX_DEBUG=1``: an error ends a command with its traceback rather than one line.
DEBUG_VAR = 'IRTBOX_DEBUG'
# reST roles (:func:`~a.b.f`) and literals (``x``) of the docstrings --help shows.
_ROLE = re.compile(r':\w+:`~?([^`]+)`')
_LITERAL = re.compile(r'``([^`]+)``')
#: The options of the results-file commands for the visualization functions' arguments
#: whose names differ (for :func:`worded`; None: a positional argument, named by the message).
RESULTS_FLAGS = dict(name='--set', gnd_file='--gnd', path=None)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """--help of every command: descriptions and epilogs as written (they are module
    docstrings), less their reST markup, so that ``x`` reads x and :func:`f` reads f."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(_LITERAL.sub(r'\1', _ROLE.sub(r'\1', text)))


def command_parser(description: str, epilog: Optional[str] = None,
                   **kwargs) -> argparse.ArgumentParser:
    """A command's parser, its --help in :class:`HelpFormatter`."""
    return argparse.ArgumentParser(description=description, epilog=epilog,
                                   formatter_class=HelpFormatter, **kwargs)


class _CfgOptions(argparse.Action):
    """MMEngine's ``DictAction``, imported once the option is given: --help and the
    refusals of the arguments need not import mmengine (nor torch)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from irtbox.utils.config import DictAction
        DictAction(self.option_strings, self.dest, nargs=self.nargs)(
            parser, namespace, values, option_string)


def add_cfg_options(parser, help: str = 'override config entries') -> None:
    """``--cfg-options KEY=VALUE ...``, the config overrides of the commands that load one."""
    parser.add_argument('--cfg-options', nargs='+', action=_CfgOptions, metavar='KEY=VALUE',
                        help=help)


class _Verbose(argparse.Action):
    """``--verbose``: sets the variable every rank and subprocess reads."""

    def __call__(self, parser, namespace, values, option_string=None):
        os.environ[VERBOSE_VAR] = '1'
        setattr(namespace, self.dest, True)


def add_verbose_argument(parser) -> None:
    """``--verbose``: MMEngine's environment, config and hooks dump on the terminal too (the
    log file always holds it; ``IRTBOX_VERBOSE=1`` is the same)."""
    parser.add_argument('--verbose', action=_Verbose, nargs=0, default=False,
                        help='show the environment, config and hooks dump on the terminal '
                        'too (the log file always has it; IRTBOX_VERBOSE=1 is the same)')


def worded(error: BaseException, flags: Optional[Dict[str, str]] = None) -> str:
    """``error``'s message in the command line's words, from its fields
    (:class:`~irtbox.utils.errors.IrtboxError`): its ``argument`` as the command's option, in
    place of the argument's name that starts the message or before the message, and its
    ``remedy`` as the options that pass those values. ``flags``: {argument: option} where they
    differ from ``--`` and the name with dashes (``input_size`` -> ``--input-size``), None for
    a positional argument; for a remedy's boolean, the flag that gives that value."""
    # The message without the remedy IrtboxError words for Python.
    text = super(IrtboxError, error).__str__() if isinstance(error, IrtboxError) else str(error)
    argument = getattr(error, 'argument', None)
    # Only a name can be an option (a check may name a config entry: 'neck.1.dim').
    option = (option_of(argument, flags) if isinstance(argument, str) and argument.isidentifier()
              else None)
    if option:
        text = (option + text[len(argument):] if re.match(rf'{re.escape(argument)}\b', text)
                else f'{option}: {text}')
    remedy = getattr(error, 'remedy', None)
    if remedy:
        text += ' (or pass ' + ', '.join(option_of(name, flags) + ('' if isinstance(value, bool)
                                                                   else f' {value}')
                                         for name, value in remedy.items()) + ')'
    return text


def option_of(argument: str, flags: Optional[Dict[str, str]] = None) -> str:
    """The command's option for a package function's ``argument``: ``flags[argument]``, else
    ``--`` and its name with dashes."""
    return (flags or {}).get(argument, '--' + argument.replace('_', '-'))


def module_doc(module: str) -> str:
    """The docstring of the irtbox module ``module`` (dotted), read from its file: a
    command's --help that prints it need not import the module (and torch with it)."""
    path = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), *module.split('.')[1:])
    with open(path + '.py') as f:
        return ast.get_docstring(ast.parse(f.read()), clean=False) or ''


def checkpoint_argument(text: str) -> Optional[str]:
    """The ``CKPT`` argument of the commands: a checkpoint file or URL, or ``none`` (any case)
    for the config's own weights (None to the package functions)."""
    return None if text.lower() == 'none' else text


def run(main: Callable, argv: Optional[Sequence[str]] = None):
    """Run a command's ``main(argv)``, then end a distributed job's process group.

    A finished distributed process is ended at once with ``os._exit(0)``: the model wrapper
    (DDP) still holds the gloo group after it is destroyed, and tearing its threads down at
    interpreter exit aborts a finished rank now and then ("terminate called without an active
    exception"), which would fail a job that succeeded.

    An error ends the command with one line on stderr, ``irtbox: ErrorType: message``, and
    exit status 1: the library's messages name the file, key or value at fault, and a
    traceback of hundreds of lines (after MMEngine's config dump) buries them. An error
    raised inside torchvision, timm or mmengine gets the torch pair to install
    (:func:`irtbox.cli.versions.version_hint`).
    ``IRTBOX_DEBUG=1`` shows the traceback instead.
    """
    try:
        result = main(argv)
    except Exception as error:  # noqa: BLE001 (every error: one line, the traceback on demand)
        if os.environ.get(DEBUG_VAR, '').strip().lower() in ('1', 'true', 'yes', 'on'):
            raise
        message = ' '.join(worded(error).split()) or repr(error)
        from irtbox.cli.versions import version_hint  # only once something failed
        hint = version_hint(error)
        message += f'; {hint}' if hint else ''
        print(f'irtbox: {type(error).__name__}: {message} ({DEBUG_VAR}=1 shows the '
              'traceback)', file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except SystemExit as stop:
        # Pre-empted (every rank stopped at the same iteration): end the group as a finished
        # job does, so the status is 75 and not an abort of the gloo threads' teardown.
        if stop.code == PREEMPTED_EXIT_STATUS and _finish_distributed():
            os._exit(PREEMPTED_EXIT_STATUS)
        raise
    if _finish_distributed():
        os._exit(0)
    return result


def _finish_distributed() -> bool:
    """:func:`irtbox.utils.dist.finish_distributed` where torch.distributed was imported:
    without it no process group exists, and a light command (``--help``) need not import
    torch to learn so."""
    if 'torch.distributed' not in sys.modules:
        return False
    from irtbox.utils.dist import finish_distributed
    return finish_distributed()
