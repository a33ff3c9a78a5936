"""The embeddings file: one format for every set of embeddings irtbox writes.

A test's results (``results.npz``), an extraction (``features.npz`` and its shards) and
the search index (``embeddings-<tag>.npz`` in the index folder) all write it with
:func:`save_embeddings`, and everything that reads embeddings (``browse_results``,
``plot_embeddings``, ``analyze_embeddings``, the index) reads it with :func:`load_embeddings`.

It is an uncompressed ``.npz`` (NumPy's zip of ``.npy`` arrays, readable with ``np.load``) so that
the big arrays can be memory-mapped in place: a 10M x 768 collection is not read into memory to look
at a few rows. One file holds one or several *sets* (the test sets of a multi-dataset run); a set
named ``s`` keeps its arrays under ``s/``, the only set of a file under no prefix::

    format                 'irtbox-embeddings/1'
    metrics/<name>         0-d float, one per metric of the run (all sets together)
    <s/>embeddings         n x D float32
    <s/>ids                n str: image paths (relative to data_root when it is not ''),
                           or the caller's ids
    <s/>data_root          0-d str, '' when the ids are not relative paths
    <s/>labels             n int (optional)         <s/>is_query     n bool (optional)
    <s/>class_names        str per class (optional)
    <s/>failed_ids         str, <s/>failed_reasons  str: images that could not be read
    <s/>identity           0-d str, JSON: the model's identity (``irtbox.apis.model_identity``)
    <s/><other>            any other per-set array (e.g. sample_idx, ap_M), kept as given
"""
import json
import os.path as osp
import struct
import zipfile
from contextlib import closing
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from irtbox.utils.errors import ArgumentError
from irtbox.utils.fileio import atomic_write

__all__ = ['EmbeddingSet', 'save_embeddings', 'load_embeddings', 'map_embeddings',
           'embedding_set_names', 'EMBEDDINGS_FORMAT']

EMBEDDINGS_FORMAT = 'irtbox-embeddings/1'
# The arrays of a set that EmbeddingSet has fields for; anything else is in ``extra``.
_FIELDS = ('embeddings', 'ids', 'data_root', 'labels', 'is_query', 'class_names', 'failed_ids',
           'failed_reasons', 'identity')


@dataclass
class EmbeddingSet:
    """One set of embeddings and what its rows are.

    ``embeddings`` n x D float32 (a read-only memory map when loaded); ``ids`` n strings,
    image paths relative to ``data_root`` (``''``: as they are), or None; ``labels`` (n int)
    and ``is_query`` (n bool) where known; ``failed`` the (id, reason) of unreadable images;
    ``metrics`` {name: value}; ``identity`` the model's; ``extra`` any other arrays.
    """
    embeddings: np.ndarray
    ids: Optional[Sequence[str]] = None
    data_root: str = ''
    labels: Optional[np.ndarray] = None
    is_query: Optional[np.ndarray] = None
    class_names: Optional[List[str]] = None
    failed: List[Tuple[str, str]] = field(default_factory=list)
    metrics: Dict[str, float] = field(default_factory=dict)
    identity: Optional[dict] = None
    extra: Dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.embeddings)

    def paths(self, data_root: Optional[str] = None) -> List[str]:
        """The ids as file paths: joined with ``data_root`` (default: the stored one; give
        another when the images moved), absolute ones as they are."""
        if self.ids is None:
            raise ValueError('these embeddings have no ids or image paths')
        root = self.data_root if data_root is None else data_root
        return [p if osp.isabs(p) or not root else osp.join(root, p) for p in self.ids]

    def check(self, where: str = 'EmbeddingSet') -> 'EmbeddingSet':
        """Raise ``ValueError`` naming ``where`` and the array unless the shapes agree."""
        emb = self.embeddings
        if emb.ndim != 2:
            raise ValueError(f'{where}: embeddings must be an n x D array, got shape {emb.shape}')
        for name in ('ids', 'labels', 'is_query'):
            value = getattr(self, name)
            if value is not None and len(value) != len(emb):
                raise ValueError(f'{where}: {len(value)} {name} for {len(emb)} embeddings; '
                                 'expected one per embedding')
        return self


def _set_arrays(data: EmbeddingSet) -> Dict[str, np.ndarray]:
    # Fixed-width unicode, not objects: readable with allow_pickle=False.
    arrays = dict(embeddings=np.asarray(data.embeddings, dtype=np.float32),
                  data_root=np.array(data.data_root or ''),
                  failed_ids=np.array([f[0] for f in data.failed], dtype=str),
                  failed_reasons=np.array([f[1] for f in data.failed], dtype=str))
    if len(arrays['embeddings']) == 0:  # no image read: keep the 2-D shape
        arrays['embeddings'] = arrays['embeddings'].reshape(0, data.embeddings.shape[-1]
                                                            if data.embeddings.ndim == 2 else 0)
    if data.ids is not None:  # a list: written in chunks (_write_npy_member)
        arrays['ids'] = data.ids if isinstance(data.ids, list) else list(data.ids)
    for name, convert in (('labels', np.asarray), ('is_query', lambda v: np.asarray(v, bool)),
                          ('class_names', lambda v: np.array([str(c) for c in v], dtype=str)),
                          ('identity', lambda v: np.array(json.dumps(v)))):
        if getattr(data, name) is not None:
            arrays[name] = convert(getattr(data, name))
    for name, value in data.extra.items():
        if name in _FIELDS or '/' in name:
            raise ValueError(f'EmbeddingSet.extra: {name!r} is a reserved or nested name')
        arrays[name] = np.asarray(value)
    return arrays


def save_embeddings(path: str, sets: Union[EmbeddingSet, Dict[str, EmbeddingSet]]) -> None:
    """Write one set, or several ({name: set}, e.g. the test sets '0', '1' of a run), to
    ``path`` (a ``.npz``), whole or not at all. The metrics of all sets are written once, at
    the top of the file."""
    if isinstance(sets, EmbeddingSet):
        sets = {'': sets}
    arrays = {'format': np.array(EMBEDDINGS_FORMAT)}
    for name, data in sets.items():
        data.check(f'save_embeddings({path}, set {name!r})' if name else f'save_embeddings({path})')
        prefix = f'{name}/' if name else ''
        arrays.update({prefix + k: v for k, v in _set_arrays(data).items()})
        arrays.update({f'metrics/{k}': np.asarray(float(v)) for k, v in data.metrics.items()})

    def write(tmp: str) -> None:
        # What np.savez writes (an uncompressed zip of .npy members), member by member, so
        # that a memory-mapped array is copied in chunks (_write_npy_member).
        with open(tmp, 'wb') as f, zipfile.ZipFile(f, 'w', zipfile.ZIP_STORED,
                                                   allowZip64=True) as zf:
            for key, value in arrays.items():
                with zf.open(key + '.npy', 'w', force_zip64=True) as member:
                    _write_npy_member(member, value)
    atomic_write(path, write)


_COPY_BYTES = 64 << 20  # a memory-mapped array is written this much at a time


def _mapping_of(array: np.ndarray):
    """The ``mmap.mmap`` that ``array`` is a view of (a memory-mapped embeddings file), or
    None; None too for a copy-on-write map (``mode='c'``), whose pages given back would
    lose its changes."""
    import mmap
    base = array
    while base is not None:
        if isinstance(base, np.memmap) and base.mode == 'c':
            return None
        if isinstance(base, mmap.mmap):
            return base
        base = getattr(base, 'base', None)
    return None


def _write_npy_member(member, array: np.ndarray) -> None:
    """``array`` as a ``.npy`` into the zip member ``member`` (what np.savez writes). A
    memory map (the 15 GB of 10M x 384 an index folder keeps) is copied ``_COPY_BYTES`` at
    a time and its pages are given back after each chunk (MADV_DONTNEED; they stay in the
    page cache), so the writer's resident memory does not grow with the file."""
    import mmap
    if isinstance(array, list):  # strings: as np.array(array, dtype=str), 65,536 at a time
        _write_strings(member, array)
        return
    mapping = _mapping_of(array)
    if mapping is None or array.dtype.hasobject or not array.flags.c_contiguous \
            or array.ndim == 0:
        np.lib.format.write_array(member, array, allow_pickle=True)  # as np.savez
        return
    header = np.lib.format.header_data_from_array_1_0(array)
    try:
        np.lib.format.write_array_header_1_0(member, header)
    except ValueError:  # a header over 64K (a huge shape): the version np.save would use
        np.lib.format.write_array_header_2_0(member, header)
    rows = max(1, _COPY_BYTES // max(1, array[:1].nbytes))
    for start in range(0, len(array), rows):
        member.write(array[start:start + rows].tobytes())
        mapping.madvise(mmap.MADV_DONTNEED)


def _write_strings(member, strings: list) -> None:
    """``strings`` as the ``.npy`` of ``np.array(strings, dtype=str)``, converted a chunk at
    a time: one fixed-width array of all the ids would add to the peak of a build."""
    width = max((len(s) if isinstance(s, str) else len(str(s)) for s in strings), default=1)
    dtype = np.dtype(f'<U{max(1, width)}')
    header = dict(descr=np.lib.format.dtype_to_descr(dtype), fortran_order=False,
                  shape=(len(strings),))
    np.lib.format.write_array_header_1_0(member, header)
    for start in range(0, len(strings), 65536):
        member.write(np.array(strings[start:start + 65536], dtype=dtype).tobytes())


def _memmap_member(path: str, info: zipfile.ZipInfo) -> Optional[np.ndarray]:
    """A read-only memory map of the ``.npy`` member ``info`` of the zip ``path``, or None when
    it cannot be mapped (compressed, or an object array)."""
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, 'rb') as f:
        f.seek(info.header_offset)
        local = f.read(30)  # the local file header: its name and extra field lengths vary
        if local[:4] != b'PK\x03\x04':
            return None
        name_len, extra_len = struct.unpack('<HH', local[26:30])
        f.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(f)
        offset = f.tell()
    if dtype.hasobject:
        return None
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode='r', offset=offset, shape=shape,
                     order='F' if fortran else 'C')


class _Reader:
    """The arrays of an embeddings file by name, the big ones memory-mapped."""

    def __init__(self, path: str, mmap: bool):
        if not osp.isfile(path):
            raise FileNotFoundError(f'{path}: no such embeddings file (written by a test or '
                                    'an extraction)')
        self.path, self.mmap = path, mmap
        try:
            self.npz = np.load(path, allow_pickle=False)
            self.infos = {i.filename[:-len('.npy')]: i
                          for i in zipfile.ZipFile(path).infolist()}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            reason = 'an empty file (0 bytes)' if not osp.getsize(path) else error
            raise ValueError(f'{path}: not a readable .npz ({reason}); expected an embeddings '
                             'file (written by a test or an extraction)') from error
        self.keys = set(self.npz.files)

    def __getitem__(self, key: str) -> np.ndarray:
        if self.mmap and key in self.infos and self.infos[key].file_size > 1 << 20:
            mapped = _memmap_member(self.path, self.infos[key])
            if mapped is not None:
                return mapped
        try:
            return self.npz[key]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:  # a flipped bit
            raise ValueError(f'{self.path}: its array {key!r} is damaged ({error}); expected an '
                             'embeddings file as it was written: write it again') from error

    def get(self, key: str, convert=None):
        """The array ``key`` (through ``convert`` when given), None when the file has none."""
        if key not in self.keys:
            return None
        return self[key] if convert is None else convert(self[key])

    def close(self):
        self.npz.close()


def map_embeddings(path: str) -> np.ndarray:
    """The embeddings of the one-set file ``path``, memory-mapped, and nothing else read (its
    ids are 10M Python strings, 0.7 GB, in an index of 10M rows)."""
    with closing(_Reader(path, True)) as reader:
        if 'embeddings' not in reader.keys:
            raise ValueError(f'{path}: no embeddings array of a single set (has '
                             f'{sorted(reader.keys)})')
        return reader['embeddings']


def _set_names(keys) -> List[str]:
    return sorted(k[:-len('embeddings')].rstrip('/') for k in keys
                  if k.endswith('embeddings') and not k.startswith('metrics/')
                  and (k == 'embeddings' or k.endswith('/embeddings')))


def embedding_set_names(path: str) -> List[str]:
    """The names of the sets in the embeddings file ``path`` (``['']`` for a file of one)."""
    with closing(_Reader(path, mmap=False)) as reader:
        return _set_names(reader.keys)


def load_embeddings(path: str, name: Optional[str] = None, mmap: bool = True,
                    data_root: Optional[str] = None) -> EmbeddingSet:
    """The set ``name`` of the embeddings file ``path`` (None: its only set), big arrays
    memory-mapped unless ``mmap=False``; ``data_root`` replaces the stored one (the images
    moved). Raises ``FileNotFoundError`` / ``ValueError`` naming the file and what is wrong:
    no such set (listing those there), a missing or misshaped array."""
    with closing(_Reader(path, mmap)) as reader:
        names = _set_names(reader.keys)
        if not names:
            raise ValueError(f'{path}: no embeddings array (has {sorted(reader.keys)}); expected '
                             'an embeddings file (written by a test or an extraction)')
        if name is None:
            if len(names) > 1:
                raise ArgumentError(f'{path} holds {len(names)} sets of embeddings ('
                                    f'{", ".join(names)}): name one', 'name')
            name = names[0]
        if name not in names:
            shown = ', '.join(repr(n) for n in names)
            raise ValueError(f'{path}: no set {name!r} of embeddings; it has {shown}')
        p = f'{name}/' if name else ''
        failed_ids = reader.get(p + 'failed_ids', np.ndarray.tolist) or []
        data = EmbeddingSet(
            embeddings=reader[p + 'embeddings'],
            ids=reader.get(p + 'ids', np.ndarray.tolist),
            data_root=(reader.get(p + 'data_root', str) or '') if data_root is None else data_root,
            labels=reader.get(p + 'labels'), is_query=reader.get(p + 'is_query'),
            class_names=reader.get(p + 'class_names', np.ndarray.tolist),
            failed=list(zip(failed_ids, reader.get(p + 'failed_reasons', np.ndarray.tolist) or [])),
            metrics={k[len('metrics/'):]: float(reader[k]) for k in sorted(reader.keys)
                     if k.startswith('metrics/') and reader[k].ndim == 0},
            identity=reader.get(p + 'identity', lambda a: json.loads(str(a))),
            extra={k[len(p):]: reader[k] for k in sorted(reader.keys)
                   if k.startswith(p) and '/' not in k[len(p):]
                   and k[len(p):] not in _FIELDS + ('format',)})
    return data.check(f'{path}' + (f' (set {name!r})' if name else ''))
