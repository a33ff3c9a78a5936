"""What a command checks before it builds a model, logs its environment and config, or starts
processes: its config (its keys and well-known values), the datasets it reads, its checkpoint,
its input files and folders and its outputs. Every problem found is one line, all of them at
once; under ``--nproc`` (``tools/dist_train.sh CONFIG 8``) the check runs once, before the
launcher starts any rank, rather than the same line once per rank among torchrun's failure
report.

The checks import no torch, timm or MMEngine's runner: a refusal takes well under a second
(docs/benchmarks.md, "Command start-up"). Only once they pass are the config's keys checked
against the registries (importing the parts, and torch), with what else needs torch."""
import os
import os.path as osp
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from irtbox.cli import worded

__all__ = ['input_problems', 'check_inputs', 'prepare_command']

# A problem: an error of the library (raised as it is when it is the only one), or a line.
Problem = Union[BaseException, str]
Lines = Callable[[Any], List[str]]


def input_problems(config: Optional[str], cfg_options: Optional[dict] = None,
                   loaders: Sequence[str] = (), checkpoint: Optional[str] = None,
                   checkpoint_argument: str = 'CKPT',
                   folders: Optional[Dict[str, str]] = None,
                   files: Sequence[Tuple[str, str]] = (),
                   outputs: Optional[Dict[str, tuple]] = None,
                   more: Optional[Lines] = None,
                   more_with_torch: Optional[Lines] = None) -> List[Problem]:
    """The problems of a command's inputs: ``config`` (with ``cfg_options``) that does not
    load or whose values are wrong; a dataset of its dataloaders ``loaders`` that is
    not there (``val_dataloader`` only where the config validates); ``checkpoint`` that is
    neither a file nor a URL (named as ``checkpoint_argument``); ``folders`` ({argument:
    path}) that are not folders, ``files`` ((argument, path), ...) that are not files;
    ``outputs`` ({argument: (path, folder)}) that cannot be written; and the lines
    ``more(cfg)`` gives (a command's options that the config refuses). Arguments are named
    as given (``'CKPT'``, ``'--out'``). None of these imports torch; when they find nothing,
    the config's keys against the registries and the lines of ``more_with_torch(cfg)``.
    ``config`` None: no config (``publish_model`` reads the checkpoint's), only the paths."""
    from irtbox.ops.config_inputs import check_config_values
    from irtbox.utils.checks import check_checkpoint
    from irtbox.utils.config import CustomImportError, load_config
    from irtbox.utils.fileio import write_problem
    problems: List[Problem] = []
    if checkpoint is not None:
        try:
            check_checkpoint(checkpoint)
        except FileNotFoundError as error:
            problems.append(f'{checkpoint_argument}: {error} (expected a file or a URL)')
    for argument, path in (folders or {}).items():
        if not osp.isdir(path):
            problems.append(f'{argument}: folder not found: {path!r} (relative to {os.getcwd()})')
    problems += [f'{argument}: file not found: {path!r} (relative to {os.getcwd()})'
                 for argument, path in files if not osp.isfile(path)]
    # Rank 0 writes the outputs: another machine's rank may not see their folder.
    if outputs and all(os.environ.get(k, '0') in ('', '0') for k in ('RANK', 'SLURM_PROCID')):
        problems += [f'{argument} {problem}' for argument, (path, folder)
                     in outputs.items() if path is not None
                     for problem in [write_problem(path, folder)] if problem]
    if config is None:
        return problems
    try:
        cfg = load_config(_config_file(config), cfg_options)
    except CustomImportError as error:  # its message alone, not MMEngine's listing of sys.path
        return [str(error)] + problems
    except Exception as error:  # noqa: BLE001 (a config that does not load: nothing more to read)
        return [error] + problems
    problems[:0] = (_raised(check_config_values, cfg, config) + (more(cfg) if more else [])
                    + _missing_data(cfg, config, loaders))
    if problems:
        return problems
    from irtbox.ops.config_check import check_config_keys  # the registries: torch
    return _raised(check_config_keys, cfg, config) or (more_with_torch(cfg) if more_with_torch
                                                        else [])


def _raised(check: Callable, *args) -> List[Problem]:
    """The config's error ``check(*args)`` raises, as a problem (a custom import's, its
    message alone); none when it passes."""
    from irtbox.utils.config import ConfigError, CustomImportError
    try:
        check(*args)
    except CustomImportError as error:
        return [str(error)]
    except ConfigError as error:
        return [error]
    return []


def check_inputs(*args, **kwargs) -> None:
    """Return if :func:`input_problems` finds none; raise the only one as it is, or
    ``SystemExit`` with one line per problem."""
    problems = input_problems(*args, **kwargs)
    if len(problems) == 1 and isinstance(problems[0], BaseException):
        raise problems[0]
    if problems:
        raise SystemExit('\n'.join(' '.join((p if isinstance(p, str) else
                                             f'{type(p).__name__}: {worded(p)}').split())
                                   for p in problems))


def _config_file(config: str) -> str:
    """The config file ``config`` names: a file or a config irtbox ships, else (not a path)
    a model zoo name (its index is YAML: no torch)."""
    from irtbox.utils.config import find_config
    try:
        return find_config(config)
    except FileNotFoundError:
        if config.endswith('.py') or os.sep in config:  # no zoo name is a path
            raise
    from irtbox.apis.model_zoo import resolve_config
    return resolve_config(config)


def prepare_command(name: str, root: str) -> str:
    """The command that prepares the dataset ``name`` (a prepared dataset, or the quick start's
    digits: :func:`~irtbox.ops.prepare.missing.prepared_dataset`) into ``root``."""
    from irtbox.ops.config_inputs import DIGITS
    if name == DIGITS:
        return f'irtbox prepare-digits --out {root}'
    return f'irtbox prepare {name} --root {root}'


def _missing_data(cfg, config: str, loaders: Sequence[str]) -> List[str]:
    """A line per dataset of ``loaders`` whose folder is not there: the command that prepares
    it, or how to point at it."""
    from irtbox.ops.config_inputs import missing_roots, named_dataset
    validates = all(cfg.get(k) is not None for k in ('val_dataloader', 'val_cfg',
                                                     'val_evaluator'))
    loaders = [key for key in loaders if key != 'val_dataloader' or validates]
    lines = []
    for key, dataset in missing_roots(cfg, loaders):
        root = dataset['data_root']
        prepared = named_dataset(dataset, root)
        if prepared is None:  # only its dataset class knows: the one refusal here with torch
            from irtbox.ops.prepare.missing import prepared_dataset
            prepared = prepared_dataset(dataset, root)
        how = (f'prepare it with `{prepare_command(prepared, root)}`' if prepared
               else 'prepare it as docs/datasets.md describes')
        lines.append(f'{config}: no dataset at {key}.data_root={root!r} '
                     f'(relative to {os.getcwd()}); {how}, or give its folder with '
                     f'--cfg-options {key}.data_root=PATH')
    return lines
