"""Loading configs with errors that name the file and the entry at fault."""
import ast
import difflib
import json
import os.path as osp
import traceback

from mmengine.config import Config, DictAction  # noqa: F401  (DictAction re-exported for cli)

from irtbox.registry import unregistered_types
from .errors import IrtboxError, with_prefix
from .fileio import read_json
from .mmengine_compat import base_path_resolver

__all__ = ['ConfigError', 'CustomImportError', 'Config', 'DictAction', 'CONFIGS_DIR',
           'SHIPPED_PREFIX', 'find_config', 'load_config', 'check_top_level_keys',
           'check_option_types', 'check_option_paths', 'config_data', 'config_from_data',
           'config_from_text']

#: The configs irtbox ships, inside the installed package (a checkout's ``configs/`` links
#: here), so that ``configs/irt/...py`` and the zoo's names work from any folder.
CONFIGS_DIR = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'configs')

#: ``_base_ = ['irtbox::quickstart/x.py']`` names a config irtbox ships, wherever it is
#: installed (MMEngine's ``package::path`` syntax, which knows only OpenMMLab's packages).
SHIPPED_PREFIX = 'irtbox::'


def _base_path(get_cfg_path):
    """MMEngine's resolution of a ``_base_`` entry, plus :data:`SHIPPED_PREFIX`; a relative
    entry that is no file but names a shipped config is refused with the prefix to use."""
    def resolve(cfg_path: str, filename: str):
        if cfg_path.startswith(SHIPPED_PREFIX):
            name = cfg_path[len(SHIPPED_PREFIX):]
            try:
                return find_config(name, shipped_only=True), None
            except FileNotFoundError:
                raise FileNotFoundError(f'{filename}: _base_ {cfg_path!r}: irtbox ships no config '
                                        f'{name} (they are under {CONFIGS_DIR})') from None
        path, scope = get_cfg_path(cfg_path, filename)
        if scope is None and not osp.isfile(path):
            try:
                find_config(cfg_path, shipped_only=True)
            except FileNotFoundError:
                raise FileNotFoundError(f'{filename}: _base_ {cfg_path!r}: no such file '
                                        f'({path})') from None
            raise FileNotFoundError(f'{filename}: _base_ {cfg_path!r}: no such file ({path}); '
                                    f'the config irtbox ships is {SHIPPED_PREFIX}{cfg_path!s}')
        return path, scope
    return resolve


# The top-level keys the runner reads (MMEngine's Runner.from_cfg and IrtboxRunner).
RUNNER_KEYS = (
    'activation_checkpointing', 'auto_scale_lr', 'compile', 'custom_hooks', 'data_preprocessor',
    'default_hooks', 'default_scope', 'efficient_conv_bn_eval', 'env_cfg', 'experiment_name',
    'find_unused_parameters', 'launcher', 'load_from', 'load_partial', 'log_level',
    'log_processor', 'model', 'model_wrapper_cfg', 'optim_wrapper', 'param_scheduler',
    'randomness', 'resume', 'runner_type', 'test_cfg', 'test_dataloader', 'test_evaluator',
    'train_cfg', 'train_dataloader', 'val_cfg', 'val_dataloader', 'val_evaluator',
    'vis_backends', 'visualizer', 'work_dir')


class ConfigError(IrtboxError, ValueError):
    """A config entry or ``cfg_options`` value the toolbox would otherwise misread
    (``argument``: ``'cfg_options'`` when an option is at fault)."""


class CustomImportError(IrtboxError, ImportError):
    """A module a config's ``custom_imports`` names that Python cannot find."""


def load_config(path: str, cfg_options: dict = None) -> Config:
    """``Config.fromfile`` with irtbox's ``_base_`` entries (:data:`SHIPPED_PREFIX`, here only:
    MMEngine's ``Config`` is left as it is) plus ``cfg_options``, checked."""
    path = find_config(path)
    try:
        with base_path_resolver(_base_path):
            cfg = Config.fromfile(path)
    except ImportError as err:
        # MMEngine's message lists all of sys.path over dozens of lines: one line instead,
        # from the chain it raised: "Failed to import NAME", caused by the import's own error.
        failed = err.__cause__
        name = str(failed).partition('Failed to import ')[2] if failed is not None else ''
        reason = failed.__context__ if failed is not None else None
        if not name or reason is None:
            raise with_prefix(err, f'could not load config {path}') from err
        if isinstance(reason, ModuleNotFoundError) and reason.name and \
                name.startswith(reason.name):
            raise CustomImportError(
                f"{path}: custom_imports: no module named '{reason.name}' on the Python path; "
                'put the folder that holds it on PYTHONPATH (e.g. PYTHONPATH=my_project '
                f'when it is my_project/{reason.name}.py)') from None
        raise CustomImportError(f"{path}: custom_imports: importing '{name}' failed: "
                                f'{type(reason).__name__}: {reason}') from reason
    except Exception as err:  # re-raised naming the config file
        if not str(err).strip("'"):  # MMEngine's lazy-import mode blocks a call with no word
            err.args = (_raising_line(err, path), )
        if isinstance(err, SyntaxError) and err.filename in (None, '<unknown>'):
            err.filename = path  # MMEngine parses the file's text without its name
        raise with_prefix(err, f'could not load config {path}') from err
    if cfg_options:
        check_option_paths(cfg, cfg_options, path)
        check_option_types(cfg, cfg_options)
        cfg.merge_from_dict(cfg_options)
    check_top_level_keys(cfg, path)
    cfg.setdefault('default_scope', 'irtbox')
    return cfg


def config_data(cfg: Config, where: str) -> dict:
    """``cfg`` as plain data (what JSON holds), checked as :func:`config_from_data` checks it:
    a config that a folder can carry and another machine load without running code. Its
    ``custom_imports`` are left out: a model of your own modules loads from the config you
    name."""
    data = json.loads(json.dumps(cfg.to_dict(), default=lambda value: _not_data(value, cfg)))
    data.pop('custom_imports', None)
    _check_data(data, where)
    return data


def _not_data(value, cfg):
    raise ConfigError(f'config {getattr(cfg, "filename", None) or ""}: {value!r} is not plain '
                      'data (numbers, strings, lists, dicts); it cannot be saved as JSON')


def _check_data(data, where: str) -> None:
    """Refuse what would make loading ``data`` run code: ``_base_`` (Python files),
    ``custom_imports`` (modules), another ``default_scope`` (its package), a ``type`` that no
    registry holds (MMEngine imports and calls a dotted path)."""
    if not isinstance(data, dict):
        raise ConfigError(f'{where}: expected a JSON object (a config), got '
                          f'{type(data).__name__}')
    found = [key for key in ('_base_', 'custom_imports') if key in data]
    if data.get('default_scope', 'irtbox') != 'irtbox':
        found.append('default_scope')
    found += [f'{key}.type' for key in unregistered_types(data)]
    if found:
        raise ConfigError(f'{where}: {", ".join(found[:5])}: a config read as data may name only '
                          'the parts registered in irtbox (no _base_, custom_imports or dotted '
                          'import path), since loading would otherwise run code')


def config_from_data(path: str) -> Config:
    """The config saved as JSON data by :func:`config_data` in ``path``, checked, read without
    running any code (:func:`load_config` would run a ``_base_``'s Python)."""
    try:
        data = read_json(path)
    except ValueError as err:
        raise ConfigError(f'{path}: not valid JSON: {err}') from None
    _check_data(data, path)
    return Config(data, filename=path)


def config_from_text(text: str, where: str) -> Config:
    """A config's text as MMEngine prints it (``meta.cfg`` of a checkpoint: ``NAME = VALUE``
    lines of literals and ``dict(...)``) read as data, without running it, and checked."""
    data = {}
    try:
        for node in ast.parse(text).body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                raise ValueError(f'line {node.lineno} is not NAME = VALUE')
            data[node.targets[0].id] = _literal(node.value)
    except (SyntaxError, ValueError) as err:
        raise ConfigError(f'{where}: {err}: expected a config of plain values (it is read as '
                          'data, not run)') from None
    _check_data(data, where)
    return Config(data)


def _literal(node):
    """The value of ``node``: literals, lists, tuples, dicts and ``dict(key=...)``, no more."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'dict' \
            and not node.args and all(k.arg for k in node.keywords):
        return {k.arg: _literal(k.value) for k in node.keywords}
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {ast.literal_eval(k): _literal(v) for k, v in zip(node.keys, node.values)}
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f'line {node.lineno}: {ast.unparse(node)[:60]} is not a plain '
                         'value') from None


def _raising_line(err: BaseException, path: str) -> str:
    """What the config line that raised ``err`` (an exception without a message) did."""
    frames = traceback.extract_tb(err.__traceback__)
    own = [f for f in frames if osp.abspath(f.filename) == osp.abspath(path)]
    where = f'line {own[-1].lineno}, {own[-1].line!r}: ' if own else ''
    if frames and frames[-1].filename.endswith(osp.join('mmengine', 'config', 'lazy.py')):
        return (f'{where}blocked by MMEngine\'s config loader ({type(err).__name__}): a config '
                'that imports modules is read in its lazy-import mode, where an imported name '
                'cannot be called; expected plain values (numbers, strings, lists, dicts)')
    return f'{where}{type(err).__name__} without a message'


def find_config(name: str, shipped_only: bool = False) -> str:
    """The config file ``name`` names: a file, else a config irtbox ships (``configs/irt/x.py``,
    ``irt/x.py``, ``irt/x`` or ``irtbox::irt/x.py``); ``shipped_only``: only the latter."""
    if osp.isfile(name) and not shipped_only:
        return name
    name = name.removeprefix(SHIPPED_PREFIX)
    shipped = osp.normpath(name).removeprefix('configs' + osp.sep)
    for candidate in (shipped, shipped + '.py'):
        if not osp.isabs(candidate) and osp.isfile(osp.join(CONFIGS_DIR, candidate)):
            return osp.join(CONFIGS_DIR, candidate)
    raise FileNotFoundError(f'config file not found: {name} (not a file, not a config irtbox '
                            f'ships under {CONFIGS_DIR})')


def check_top_level_keys(cfg: Config, path: str) -> None:
    """Refuse a top-level key that nearly spells a runner key (``trian_cfg``): the runner
    would silently ignore it. A name starting with ``_`` is never checked."""
    for key in cfg.keys():
        if key in RUNNER_KEYS or key.startswith('_'):
            continue
        # Close in spelling and in length: a typo, not a variable named after a key
        # (``train_eval_dataloader`` is not a misspelled ``train_dataloader``).
        close = [k for k in difflib.get_close_matches(key, RUNNER_KEYS, n=3, cutoff=0.85)
                 if abs(len(k) - len(key)) <= 2]
        if close:
            raise ConfigError(
                f'{path}: unknown top-level key {key!r}; did you mean {close[0]!r}? The runner '
                f'ignores {key!r}, so its settings would be lost. (A variable of your own: '
                "rename it or start its name with '_'.)")


def _config_value(cfg, dotted: str):
    """(True, value) of ``a.b.0.c`` in ``cfg``, or (False, None) when it is not there."""
    node = cfg
    for part in dotted.split('.'):
        if isinstance(node, (dict, Config)) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def check_option_paths(cfg: Config, cfg_options: dict, path: str) -> None:
    """Refuse the option ``a.b.c=V`` where the config sets ``a`` (or ``a.b``) to None or to
    a value that is no dict (else MMEngine's ``_delete_=True`` TypeError)."""
    for key, value in cfg_options.items():
        parts = key.split('.')
        for depth in range(1, len(parts)):
            prefix = '.'.join(parts[:depth])
            present, current = _config_value(cfg, prefix)
            if not present:
                break  # a new entry: MMEngine creates it
            if isinstance(current, (dict, Config)) or (
                    isinstance(current, (list, tuple)) and parts[depth].isdigit()):
                continue
            what = ('None: the config has no such part (a test-only config has no training '
                    'parts)' if current is None else f'{current!r}, not a dict')
            raise ConfigError(
                f'cfg_options {key}={value!r}: {path} sets {prefix} = {what}; there is no '
                f'{".".join(parts[:depth + 1])} to change. Give the whole entry '
                f'({prefix}=...) or use a config that has one.', argument='cfg_options')


def check_option_types(cfg: Config, cfg_options: dict) -> None:
    """Refuse the option ``KEY=VALUE`` whose value cannot be of the type the config has at
    KEY (a number, a bool): else an unrelated error deep in training, or none."""
    for key, value in cfg_options.items():
        present, current = _config_value(cfg, key)
        if not present or current is None:
            continue
        if isinstance(current, bool):
            ok, expected = isinstance(value, bool), 'True or False'
        elif isinstance(current, (int, float)):
            # int and float both pass: a margin of 1 may well become 0.5.
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            expected = 'a number'
        else:
            continue
        if not ok:
            where = getattr(cfg, 'filename', None) or 'the config'
            raise ConfigError(f'cfg_options {key}={value!r}: expected {expected}, as '
                              f'{key} = {current!r} in {where}', argument='cfg_options')

