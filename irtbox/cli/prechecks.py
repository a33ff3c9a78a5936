"""What a command checks before it builds a model, logs its environment and config, or starts
processes: its config (its keys and well-known values), the datasets it reads, its checkpoint
and its input folders. Every problem found is one line, all of them at once; under ``--nproc``
(``tools/dist_train.sh CONFIG 8``) the check runs once, before the launcher starts any rank,
rather than the same line once per rank among torchrun's failure report."""
import os
import os.path as osp
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from irtbox.cli import worded

__all__ = ['input_problems', 'check_inputs']

# A problem: an error of the library (raised as it is when it is the only one), or a line.
Problem = Union[BaseException, str]


def input_problems(config: str, cfg_options: Optional[dict] = None,
                   loaders: Sequence[str] = (), checkpoint: Optional[str] = None,
                   checkpoint_argument: str = 'CKPT',
                   folders: Optional[Dict[str, str]] = None,
                   outputs: Optional[Dict[str, tuple]] = None,
                   more: Optional[Callable[[Any], List[str]]] = None) -> List[Problem]:
    """The problems of a command's inputs: ``config`` (with ``cfg_options``) that does not
    load or whose keys or values are wrong; a dataset of its dataloaders ``loaders`` that is
    not there (``val_dataloader`` only where the config validates); ``checkpoint`` that is
    neither a file nor a URL (named as ``checkpoint_argument``); ``folders`` ({argument:
    path}) that are not folders; ``outputs`` ({argument: (path, folder)}) that cannot be
    written; and the lines ``more(cfg)`` gives (a command's options that the config refuses)."""
    from irtbox.apis.run_setup import check_checkpoint, load_run_config
    from irtbox.utils.config import ConfigError, CustomImportError
    problems: List[Problem] = []
    if checkpoint is not None:
        try:
            check_checkpoint(checkpoint)
        except FileNotFoundError as error:
            problems.append(f'{checkpoint_argument}: {error} (expected a file or a URL)')
    for argument, path in (folders or {}).items():
        if not osp.isdir(path):
            problems.append(f'{argument}: folder not found: {path!r} (relative to {os.getcwd()})')
    # Rank 0 writes the outputs: another machine's rank may not see their folder.
    if outputs and all(os.environ.get(k, '0') in ('', '0') for k in ('RANK', 'SLURM_PROCID')):
        from irtbox.apis.tester import EvaluationSetupError, check_output_path
        for argument, (path, folder) in outputs.items():
            if path is None:
                continue
            try:
                check_output_path(path, argument, folder=folder)
            except EvaluationSetupError as error:
                problems.append(worded(error))
    try:
        cfg = load_run_config(config, cfg_options)
    except CustomImportError as error:  # its message alone, not MMEngine's listing of sys.path
        return [str(error)] + problems
    except Exception as error:  # noqa: BLE001 (a config that does not load: nothing more to read)
        return [error] + problems
    problems[:0] = (more(cfg) if more else []) + _missing_data(cfg, config, loaders)
    from irtbox.ops.config_check import check_config_keys
    try:
        check_config_keys(cfg)
    except CustomImportError as error:
        problems.insert(0, str(error))
    except ConfigError as error:
        problems.insert(0, error)
    return problems


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


def _missing_data(cfg, config: str, loaders: Sequence[str]) -> List[str]:
    """A line per dataset of ``loaders`` whose folder is not there: the command that prepares
    it, or how to point at it."""
    from irtbox.cli.prepare import prepare_command
    from irtbox.ops.prepare.missing import missing_data
    validates = all(cfg.get(k) is not None for k in ('val_dataloader', 'val_cfg',
                                                     'val_evaluator'))
    loaders = [key for key in loaders if key != 'val_dataloader' or validates]
    lines = []
    for missing in missing_data(cfg, loaders):
        how = (f'prepare it with `{prepare_command(missing.prepared, missing.data_root)}`'
               if missing.prepared else 'prepare it as docs/datasets.md describes')
        lines.append(f'{config}: no dataset at {missing.key}.data_root={missing.data_root!r} '
                     f'(relative to {os.getcwd()}); {how}, or give its folder with '
                     f'--cfg-options {missing.key}.data_root=PATH')
    return lines
