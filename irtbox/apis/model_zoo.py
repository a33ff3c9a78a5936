"""The model zoo's index: ``list_models``, ``get_entry`` and ``resolve_config`` over
``model-index.yml`` and its metafiles, the OpenMMLab format (docs/model_zoo.md: the ``Weights``
forms, extra indexes by ``IRTBOX_MODEL_INDEX``, malformed entries). ``Weights`` may also be a plain
URL string (the mmpretrain form), verified by the sha256 prefix in its name if any."""
import copy
import difflib
import fnmatch
import logging
import os
import os.path as osp
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import yaml
from mmengine.logging import print_log

from irtbox.utils.checks import check_int
from irtbox.utils.config import CONFIGS_DIR, find_config
from irtbox.utils.errors import IrtboxError

__all__ = ['ROOT', 'resolve_config', 'ModelNotReleasedError', 'UnknownModelError',
           'BadZooEntryError', 'ZooEntryMismatchError', 'ZooEntry', 'read_index', 'index_files',
           'load_model_index', 'list_models', 'get_entry']

# The installed package: its model-index.yml names the configs shipped under it.
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
BUILTIN_INDEX = osp.join(ROOT, 'model-index.yml')
INDEX_ENV = 'IRTBOX_MODEL_INDEX'


class ModelNotReleasedError(IrtboxError, RuntimeError):
    """The zoo entry exists but has no released weights."""


class BadZooEntryError(IrtboxError, ValueError):
    """A model entry of an index file is malformed (its message names the file and entry)."""


class ZooEntryMismatchError(IrtboxError, ValueError):
    """The file or model an entry describes is not what the entry says (size, dimension)."""


class UnknownModelError(IrtboxError, KeyError):
    """No zoo entry has this name (a KeyError whose message prints without quotes)."""

    def __str__(self):
        return str(self.args[0])


@dataclass(frozen=True)
class ZooEntry:
    """One model of the zoo, its paths resolved. ``weights`` is None (not released), ``{'source':
    'timm', 'pretrained': str}``, or ``{'url': str, 'sha256': str or None, 'size': int or None,
    'embedding_dim': int or None}``."""
    name: str
    config: str
    weights: Optional[dict]
    metafile: str
    collection: Optional[str] = None
    metadata: dict = field(default_factory=dict)
    results: list = field(default_factory=list)

    @property
    def status(self) -> str:
        """``'released'``, ``'timm'`` (public backbone weights) or ``'not released'``."""
        if self.weights is None:
            return 'not released'
        return 'timm' if self.weights.get('source') == 'timm' else 'released'


# Parsed index files by (path, mtime, size): every get_model / list_models reads the whole
# zoo, and parsing its metafiles is slow (docs/benchmarks.md, "Model zoo index").
_PARSED: Dict[Tuple[str, int, int], dict] = {}


def _read_yaml(path: str) -> dict:
    """The mapping in the index file ``path`` (a copy of the one parsed while unchanged)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f'model index file not found: {path}') from None
    key = (osp.abspath(path), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        # libyaml's loader where PyYAML was built with it: the same result, faster.
        loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
        try:
            with open(path) as f:
                _PARSED[key] = yaml.load(f, Loader=loader)
        except yaml.YAMLError as err:
            raise ValueError(f'model index file {path} is not valid YAML: {err}') from err
    data = copy.deepcopy(_PARSED[key])
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f'model index file {path}: expected a mapping with "Import" and/or '
                         f'"Models", got a {type(data).__name__}')
    return data


def _resolve(path: str, metafile: str, index_file: str) -> str:
    """An entry's relative path, from the metafile's folder, the index's folder, the package."""
    path = osp.expanduser(path)
    if osp.isabs(path):
        return path
    candidates = [osp.join(osp.dirname(metafile), path), osp.join(osp.dirname(index_file), path),
                  osp.join(ROOT, path)]
    return osp.normpath(next((c for c in candidates if osp.exists(c)), candidates[0]))


def _parse_weights(value, where: str, metafile: str, index_file: str) -> Optional[dict]:
    if value is None:
        return None
    if isinstance(value, str):
        value = {'URL': value}
    if not isinstance(value, dict):
        raise BadZooEntryError(f'{where}: "Weights" must be null, a URL or a mapping, got '
                               f'{value!r}')
    if str(value.get('Source', '')).lower() == 'timm':
        if not value.get('Pretrained'):
            raise BadZooEntryError(f'{where}: timm weights need "Pretrained: <timm name.tag>"')
        return {'source': 'timm', 'pretrained': str(value['Pretrained'])}
    url = value.get('URL')
    if not url:
        raise BadZooEntryError(f'{where}: "Weights" needs a "URL" (or "Source: timm"); got '
                               f'keys {sorted(value)}')
    if not isinstance(url, str):
        raise BadZooEntryError(f'{where}: "URL" must be a string, got {url!r}')
    if '://' not in url:
        url = _resolve(url, metafile, index_file)
    sha256 = value.get('SHA256')
    if sha256 is not None and not re.fullmatch('[0-9a-fA-F]{64}', str(sha256)):
        raise BadZooEntryError(f'{where}: "SHA256" must be the 64 hex digits of the file\'s '
                               f'sha256, got {sha256!r}')
    numbers = {}
    for key, what in (('Size', 'the file\'s size in bytes'),
                      ('Embedding Dim', 'the embedding dimension')):
        try:
            numbers[key] = check_int(value.get(key), f'{where}: "{key}" ({what})',
                                     allow_none=True)
        except ValueError as error:
            raise BadZooEntryError(str(error)) from None
    return {'url': url, 'sha256': None if sha256 is None else str(sha256).lower(),
            'size': numbers['Size'], 'embedding_dim': numbers['Embedding Dim']}


def _parse_model(model, i: int, metafile: str, index_file: str) -> ZooEntry:
    where = f'{metafile}, Models[{i}]'
    if not isinstance(model, dict) or not model.get('Name') or not model.get('Config'):
        raise BadZooEntryError(f'{where}: every model needs "Name" and "Config"; got {model!r}')
    where = f'{metafile}, model {model["Name"]!r}'
    if not isinstance(model['Config'], str):
        raise BadZooEntryError(f'{where}: "Config" must be a path, got {model["Config"]!r}')
    metadata, results = model.get('Metadata') or {}, model.get('Results') or []
    if not isinstance(metadata, dict):
        raise BadZooEntryError(f'{where}: "Metadata" must be a mapping, got {metadata!r}')
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise BadZooEntryError(f'{where}: "Results" must be a list of mappings, got '
                               f'{results!r}')
    return ZooEntry(
        name=str(model['Name']), config=_resolve(model['Config'], metafile, index_file),
        weights=_parse_weights(model.get('Weights'), where, metafile, index_file),
        metafile=metafile, collection=model.get('In Collection'), metadata=metadata,
        results=results)


def _parse_models(data: dict, metafile: str, index_file: str,
                  broken: Optional[list] = None) -> List[ZooEntry]:
    """The entries of ``data["Models"]``. A malformed one raises, or, given ``broken``, is
    appended there as ``(name or None, BadZooEntryError)`` and left out."""
    models = data.get('Models') or []
    if not isinstance(models, list):
        raise ValueError(f'model index file {metafile}: "Models" must be a list, got a '
                         f'{type(models).__name__}')
    entries = []
    for i, model in enumerate(models):
        try:
            entries.append(_parse_model(model, i, metafile, index_file))
        except BadZooEntryError as err:
            if broken is None:
                raise
            name = model.get('Name') if isinstance(model, dict) else None
            broken.append((str(name) if name else None, err))
    return entries


def read_index(index_file: str, broken: Optional[list] = None) -> List[ZooEntry]:
    """The entries of one index file and the files it ``Import``s; a malformed one raises, or
    given ``broken`` is appended there (:func:`_parse_models`)."""
    index_file = osp.abspath(osp.expanduser(index_file))
    data = _read_yaml(index_file)
    entries = _parse_models(data, index_file, index_file, broken)
    for item in data.get('Import') or []:
        metafile = osp.normpath(osp.join(osp.dirname(index_file), item))
        if not osp.isfile(metafile):
            raise FileNotFoundError(f'{index_file} imports {item}, which does not exist '
                                    f'(looked for {metafile})')
        entries += _parse_models(_read_yaml(metafile), metafile, index_file, broken)
    seen, twice = {}, set()
    for entry in entries:
        if entry.name in seen:
            err = BadZooEntryError(f'model {entry.name!r} is defined twice: in '
                                   f'{seen[entry.name]} and {entry.metafile}')
            if broken is None:
                raise err
            broken.append((entry.name, err))
            twice.add(entry.name)  # which one was meant is unknown: neither is used
        seen[entry.name] = entry.metafile
    return [e for e in entries if e.name not in twice]


def index_files(index: Union[str, Sequence[str], None] = None) -> List[str]:
    """The index files read, lowest precedence first: the built-in one, then
    ``$IRTBOX_MODEL_INDEX``, then ``index``."""
    files = [BUILTIN_INDEX]
    files += [p for p in os.environ.get(INDEX_ENV, '').split(os.pathsep) if p]
    if index:
        files += [index] if isinstance(index, str) else list(index)
    return files


_WARNED = set()


def _load(index) -> Tuple[Dict[str, ZooEntry], Dict[str, BadZooEntryError]]:
    """(name -> entry, name -> the error of its malformed entry) over all index files, a
    later index's entry, good or bad, overriding; each malformed one warned of once."""
    entries: Dict[str, ZooEntry] = {}
    bad: Dict[str, BadZooEntryError] = {}
    for path in index_files(index):
        broken = []
        for entry in read_index(path, broken):
            if entry.name in entries and entries[entry.name].metafile != entry.metafile:
                print_log(f'model zoo: {entry.name!r} from {entry.metafile} replaces the entry '
                          f'of {entries[entry.name].metafile}', logger='current')
            entries[entry.name] = entry
            bad.pop(entry.name, None)
        for name, err in broken:
            if name is not None:
                entries.pop(name, None)
                bad[name] = err
            if str(err) not in _WARNED:
                _WARNED.add(str(err))
                print_log(f'model zoo: skipping a malformed entry: {err}. '
                          + (f'get_model({name!r}) raises this error; ' if name else '')
                          + 'the other models are unaffected.', logger='current',
                          level=logging.WARNING)
    return entries, bad


def load_model_index(index: Union[str, Sequence[str], None] = None) -> Dict[str, ZooEntry]:
    """Name -> entry over all index files; malformed entries are left out."""
    return _load(index)[0]


def list_models(pattern: Optional[str] = None, with_weights: Optional[bool] = None,
                index: Union[str, Sequence[str], None] = None) -> List[str]:
    """Sorted names of the zoo's models.

    Args:
        pattern: a shell-style wildcard (``'irt-r_*sop'``); a pattern without ``*``/``?``
            matches names that contain it.
        with_weights: True: only models ``get_model(name)`` can load weights for; False:
            only those without; None: all.
        index: extra index file(s).
    """
    entries = load_model_index(index).values()
    if pattern:
        wildcard = pattern if any(c in pattern for c in '*?[') else f'*{pattern}*'
        entries = [e for e in entries if fnmatch.fnmatch(e.name, wildcard)]
    if with_weights is not None:
        entries = [e for e in entries if (e.weights is not None) == with_weights]
    return sorted(e.name for e in entries)


def resolve_config(name: str) -> str:
    """The config file ``name`` names: a file, a config irtbox ships
    (:func:`~irtbox.utils.config.find_config`), or the config of the zoo entry ``name``."""
    try:
        return find_config(name)
    except FileNotFoundError:
        pass
    try:
        return get_entry(name).config
    except UnknownModelError:
        close = difflib.get_close_matches(name, list_models(), n=3, cutoff=0.8)
        hint = f' Did you mean the model {" or ".join(close)}?' if close else ''
        raise FileNotFoundError(
            f'config file not found: {name} (not a file, not a config irtbox ships under '
            f'{CONFIGS_DIR}, not a model zoo name: list_models() lists them).{hint}'
        ) from None


def get_entry(name: str, index: Union[str, Sequence[str], None] = None) -> ZooEntry:
    """The zoo entry called ``name``; an unknown name gets the closest known ones, a
    malformed entry its :class:`BadZooEntryError`."""
    entries, bad = _load(index)
    if name in bad:
        raise BadZooEntryError(str(bad[name]))
    if name not in entries:
        close = difflib.get_close_matches(name, entries, n=5, cutoff=0.5)
        hint = f' Did you mean: {", ".join(close)}?' if close else ''
        raise UnknownModelError(
            f'no model {name!r} in the zoo ({len(entries)} models from '
            f'{", ".join(index_files(index))}).{hint} See list_models().')
    return entries[name]
