"""``Index``: the stored rows of a collection (L2-normalised embeddings and their ids), one
:class:`~irtbox.evaluation.neighbours.faiss_index.FaissIndex` over them, exact re-ranking of its
candidates, the one recall@k of an approximate index, and the index folder it is saved as. An index
folder (format 2) holds ``manifest.json`` (factory, nprobe, k_factor, dim, count, the names of the
files below, ``root``: the folder relative ids are relative to, and their ``sha256``),
``index-<tag>.faiss``, the rows as an embeddings file ``embeddings-<tag>.npz`` and optionally the
model's config as JSON data, ``config-<tag>.json`` (an older irtbox wrote Python,
``config-<tag>.py``, which loading does not run unless named). Loading checks each file's
sha256, so an index edited or damaged since it was saved is refused, naming the file, rather
than searched.

One writer at a time: a save (and a build, :func:`index_folder_lock`) holds the folder's lock. A
loaded index's files are never changed under it by irtbox (a save writes new names and renames
them into place); one changed by anything else (``cp`` over it, truncated) is noticed before a
search reads it (:meth:`Index.check_unchanged`), not read (a mapped file cut short ends the
process with SIGBUS)."""
import contextlib
import json
import mmap
import os
import os.path as osp
import re
import sys
import uuid
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import filelock
import numpy as np
import torch

from irtbox.structures.embeddings_file import EmbeddingSet, load_embeddings, save_embeddings
from irtbox.utils.checks import check_positive_int
from irtbox.utils.config import config_data
from irtbox.utils.download import sha256sum
from irtbox.utils.errors import IrtboxError
from irtbox.utils.fileio import atomic_write_text, read_json
from irtbox.utils.lock_record import lock_record, read_lock_record
from ..functional.checks import non_finite_rows
from ..functional.ranking import blockwise_topk, stable_topk
from .faiss_index import FAISS_GPU_MAX_K, FaissIndex, IndexIntegrityError, on_gpu

__all__ = ['Index', 'RowsError', 'NotAnIndexError', 'IndexFolderBusy', 'IndexFileChangedError',
           'RecallSample', 'recall_at_k', 'rerank_exactly', 'search_reranked',
           'read_rows', 'read_manifest', 'check_files', 'read_index_rows', 'index_folder_lock',
           'MANIFEST', 'FORMAT_VERSION', 'LOCK_FILE', 'HOLDER_FILE', 'RERANK_MEMORY']

MANIFEST = 'manifest.json'
FORMAT_VERSION = 2
# What save() writes besides the manifest (named by a random tag per save), and the
# temporary files of a save that was killed.
_DATA_NAMES = r'(index-\w+\.faiss|embeddings-\w+\.npz|config-\w+\.(json|py))'
_DATA_FILE = re.compile(rf'^({_DATA_NAMES}|\.({_DATA_NAMES}|manifest\.json)\.\w+\.tmp(\.\w+)?)$')
# The lock a writer of the folder holds (flock: released by the kernel when its process ends,
# so a killed build leaves no stale lock), and beside it the holder's record (the lock file
# itself is truncated by every process that tries it).
LOCK_FILE = '.irtbox-index.lock'
HOLDER_FILE = '.irtbox-index.lock.holder.json'
# Bytes of candidate rows a re-ranking holds at once (read, then gathered per query).
RERANK_MEMORY = 256 * 2**20
# Bytes at most read in one call (Linux reads at most 2 GiB a call).
_READ_SPAN = 2**30


class NotAnIndexError(IrtboxError, FileNotFoundError):
    """A folder without an index's manifest."""


class IndexFolderBusy(IrtboxError, BlockingIOError):
    """Another build or save holds the index folder ``directory``; ``holder``: its record
    (``pid``, ``host``, ``command``, ``started``; ``{}`` when it has not written one yet)."""

    def __init__(self, directory: str, holder: dict):
        self.directory, self.holder = directory, holder
        who = (f'PID {holder.get("pid")} on {holder.get("host")}, started '
               f'{holder.get("started")}: {holder.get("command")}') if holder else \
            'a process that has not yet recorded itself'
        super().__init__(f'{directory} is being written by another build or save ({who}); '
                         'two writers would mix their indexes: wait for it to end, or write '
                         'into another folder')


class IndexFileChangedError(IrtboxError, OSError):
    """A file of a loaded index (``path``) changed since it was loaded (written over, cut
    short, replaced): the loaded index no longer matches it, and reading a memory-mapped file
    cut short would end the process."""

    def __init__(self, path: str, change: str):
        self.path = path
        super().__init__(f'{path} changed since the index was loaded ({change}); the loaded '
                         'index no longer matches it and is not searched: load the index again '
                         '(restart the server). Replace an index by saving a new one, which '
                         'renames new files into place, never by copying over its files')


class RowsError(IrtboxError, ValueError):
    """Rows or ids that cannot be indexed (not finite, of another dimension, repeated ids),
    or a search of an empty index."""


def normalize(rows: np.ndarray) -> np.ndarray:
    """``rows`` L2-normalised, as float32 (a zero row stays zero)."""
    return (rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
            ).astype(np.float32)


@contextlib.contextmanager
def index_folder_lock(directory: str):
    """Hold the index folder ``directory`` (created) for this process while the block writes
    it, or raise :class:`IndexFolderBusy` naming the process that holds it. Re-entrant within
    a thread: a build holding it saves under it."""
    os.makedirs(directory, exist_ok=True)
    lock = filelock.FileLock(osp.join(directory, LOCK_FILE), timeout=0, is_singleton=True)
    holder = osp.join(directory, HOLDER_FILE)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise IndexFolderBusy(directory, read_lock_record(holder) or {}) from None
    try:
        if lock.lock_counter == 1:
            atomic_write_text(holder, json.dumps(lock_record(command=' '.join(sys.argv))))
        yield
    finally:
        if lock.lock_counter == 1:  # removed while still held: never another's record
            with contextlib.suppress(FileNotFoundError):
                os.remove(holder)
        lock.release()


@dataclass
class RecallSample:
    """The queries of recall@k: ``positions`` (sorted) of stored rows, their ``vectors`` and
    ``exact``, each one's exact top k among the other rows (its own row left out)."""
    positions: np.ndarray
    vectors: np.ndarray
    exact: np.ndarray

    @classmethod
    def draw(cls, rows: np.ndarray, k: int = 10, num_queries: int = 1000,
             seed: Union[int, np.random.Generator] = 0,
             read: Optional[Callable[[int, int], np.ndarray]] = None) -> 'RecallSample':
        """``num_queries`` rows drawn without replacement (``seed``: a seed or a generator,
        which the draw advances) and their exact top ``min(k, N - 1)``, the rows read in
        blocks (``read(start, stop)``; the query rows by :func:`read_rows`)."""
        rng = np.random.default_rng(seed)
        n = len(rows)
        positions = np.sort(rng.choice(n, size=min(num_queries, n), replace=False))
        vectors = read_rows(rows, positions).astype(np.float32, copy=False)
        others = max(1, min(k, n - 1))
        exact = blockwise_topk(vectors, rows, others, read=read,
                               exclude=positions if n > 1 else None)[1]
        return cls(positions, vectors, exact)


def recall_at_k(search: Callable[[np.ndarray, int], np.ndarray], sample: RecallSample) -> float:
    """recall@k of ``search(vectors, k) -> nq x k positions`` against the exact top k of
    ``sample``, held out: each query's own row is left out of what it finds (k + 1 asked,
    its own dropped, else the last), since an indexed query always finds itself, which new
    queries do not. The one recall@k of irtbox's indexes."""
    k = sample.exact.shape[1]
    found = search(sample.vectors, k + 1)
    return float(np.mean([len(set([p for p in row if p != own][:k]) & set(exact)) / k
                          for row, own, exact in zip(found, sample.positions, sample.exact)]))


class Index:
    """N stored rows (L2-normalised float32, in memory or memory-mapped), their N ids, the
    identity of the model that made them, and one ``FaissIndex`` over them (``faiss_index``;
    similarity: the cosine).

    Args:
        factory, nprobe, device, gpu_temp_memory: the ``FaissIndex``'s.
        k_factor: an approximate index re-ranks ``k_factor`` x k candidates exactly against
            the stored rows (:func:`rerank_exactly`); 1: the index's own scores and order.
        identity: the model's identity (:func:`~irtbox.apis.identity.model_identity`).

    Attributes:
        root: the folder relative ids are relative to (None until saved or loaded).
        build_info: what a build measured, saved as the manifest's ``build`` (or None).
    """

    def __init__(self, factory: str = 'Flat', nprobe: Optional[int] = None, device=None,
                 gpu_temp_memory: Optional[int] = None, k_factor: int = 1,
                 identity: Optional[dict] = None):
        self.faiss_index = FaissIndex(factory, nprobe=nprobe, device=device,
                                      gpu_temp_memory=gpu_temp_memory)
        self.k_factor, self.identity = check_positive_int(k_factor, 'k_factor'), identity
        self.rows = np.zeros((0, 0), dtype=np.float32)
        self.ids: List[str] = []
        self.root: Optional[str] = None
        self.build_info: Optional[dict] = None
        # The files a loaded index reads, as they were when loaded: path -> (device, inode,
        # size, mtime).
        self._files: Dict[str, tuple] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def capped(self) -> Optional[dict]:
        """The first search whose candidates faiss-gpu's limit cut (``asked``, ``searched``,
        ``k``, ``k_factor``), else None; saved in the manifest as ``candidates_capped`` (a
        build's recall was measured so)."""
        return self.faiss_index.capped

    @property
    def dim(self) -> Optional[int]:
        return self.rows.shape[1] if len(self.ids) else None

    def add(self, rows: np.ndarray, ids: Sequence[str]) -> None:
        """Add the N x D float ``rows`` (normalised here) under the N unique string ``ids``."""
        rows, ids = np.atleast_2d(np.asarray(rows, np.float32)), [str(i) for i in ids]
        if len(ids) != len(rows):
            raise RowsError(f'{len(rows)} embeddings but {len(ids)} ids')
        if not len(ids):
            return
        if self.dim is not None and rows.shape[1] != self.dim:
            raise RowsError(f'{rows.shape[1]}-d embeddings, the index holds {self.dim}-d ones')
        bad = [ids[i] for i in non_finite_rows(rows)]
        if bad:
            raise RowsError(f'{len(bad)} of {len(ids)} embeddings are not finite (NaN or inf):'
                            f' {bad[:5]}; they would make the index useless')
        seen, repeated = set(self.ids), []
        for i in ids:
            if i in seen:
                repeated.append(i)
            seen.add(i)
        if repeated:
            raise RowsError(f'ids already in the index or repeated: {repeated[:5]} '
                            f'({len(repeated)} in all)')
        rows = normalize(rows)
        self.faiss_index.add(rows)
        self.rows = rows if not len(self.ids) else np.concatenate([self.rows, rows])
        self.ids += ids

    def search(self, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """(nq x k similarities, nq x k positions, -1 where fewer were found) of the nq x D
        normalised float32 ``queries``, re-ranked exactly when ``k_factor`` > 1 (on a GPU at
        most the FAISS_GPU_MAX_K candidates faiss-gpu selects)."""
        if not len(self.ids):
            raise RowsError('the index is empty; add rows first')
        self.check_unchanged()
        return search_reranked(self.faiss_index, self.rows, queries, k, self.k_factor)

    def check_unchanged(self) -> None:
        """Raise :class:`IndexFileChangedError` naming a file this index was loaded from that
        has changed since (another inode, size or modification time). A file removed is not
        a change: its inode (mapped, or read as the map's) stays readable until closed."""
        for path, known in self._files.items():
            try:
                now = _file_state(path)
            except FileNotFoundError:
                continue
            if now != known:
                change = ('replaced: another file' if now[:2] != known[:2] else
                          f'written over in place: {known[2]} -> {now[2]} bytes'
                          if now[2] != known[2] else 'written over in place')
                raise IndexFileChangedError(path, change)

    def recall_at_k(self, k: int = 10, num_queries: int = 1000, seed: int = 0,
                    sample: Optional[RecallSample] = None) -> float:
        """The held-out recall@k (:func:`recall_at_k`) of :meth:`search`; 1.0 for one row."""
        if not len(self.ids):
            raise RowsError('the index is empty; add rows first')
        if len(self.ids) == 1:
            return 1.0
        sample = sample or RecallSample.draw(self.rows, k, num_queries, seed)
        return recall_at_k(lambda q, kk: self.search(q, min(kk, len(self.ids)))[1], sample)

    def save(self, directory: str, config=None) -> None:
        """Write the index folder; ``config``: the model's config (a ``Config``, saved as plain
        data: :func:`~irtbox.utils.config.config_data`) or that data (a dict). The data
        files get new names, then the manifest naming them is replaced in one rename, then the
        old files are removed: a crash at any moment leaves the previous save readable, and an
        index loaded from the folder reads its old files (removed, not changed) until loaded
        again. Holds the folder (:func:`index_folder_lock`): another writer is refused."""
        with index_folder_lock(directory):
            self._save(directory, config)

    def _save(self, directory: str, config) -> None:
        self.root = osp.abspath(self.root or os.getcwd())
        tag = uuid.uuid4().hex[:12]
        files = dict(index=f'index-{tag}.faiss', embeddings=f'embeddings-{tag}.npz')
        if config is not None:  # so that a query needs only the index folder (and the weights)
            files['config'] = f'config-{tag}.json'
        try:
            if config is not None:  # data, not Python: loading the folder runs none of it
                data = config if isinstance(config, dict) else config_data(
                    config, getattr(config, 'filename', None) or directory)
                atomic_write_text(osp.join(directory, files['config']), json.dumps(data, indent=1))
            self._write(directory, files)
        except BaseException:  # a full disk, an interrupt: this save's files go, the last stays
            if not _manifest_names(directory, files):  # (unless the new manifest is in place)
                for name in files.values():
                    if osp.exists(osp.join(directory, name)):
                        os.remove(osp.join(directory, name))
            raise
        for name in os.listdir(directory):  # the previous save's, and a killed save's
            if _DATA_FILE.match(name) and name not in files.values():
                os.remove(osp.join(directory, name))

    def _write(self, directory: str, files: dict) -> None:
        dim = self.dim or (self.identity or {}).get('embedding_dim')
        self.faiss_index.save(osp.join(directory, files['index']), dim or 1)
        rows = self.rows if len(self.ids) else np.zeros((0, dim or 0), np.float32)
        save_embeddings(osp.join(directory, files['embeddings']),
                        EmbeddingSet(rows, ids=list(self.ids), identity=self.identity))
        manifest = dict(format_version=FORMAT_VERSION, factory=self.faiss_index.factory,
                        dim=dim, count=len(self.ids), nprobe=self.faiss_index.nprobe,
                        k_factor=self.k_factor, files=files, root=self.root,
                        sha256={name: sha256sum(osp.join(directory, name))
                                for name in files.values()})
        if self.build_info is not None:
            manifest['build'] = self.build_info
        if self.capped is not None:  # a recall measured before the save was measured so
            manifest['candidates_capped'] = self.capped
        atomic_write_text(osp.join(directory, MANIFEST), json.dumps(manifest, indent=1))

    @classmethod
    def load(cls, directory: str, device=None, nprobe: Optional[int] = None,
             k_factor: Optional[int] = None, gpu_temp_memory: Optional[int] = None) -> 'Index':
        """The index saved in ``directory``, its rows memory-mapped (read-only) and on the
        CPU an IVF index's lists too; ``nprobe`` and ``k_factor`` by default the saved ones.
        Raises :class:`IndexIntegrityError` naming the file that is not as recorded."""
        manifest = read_manifest(directory)
        paths = [osp.join(directory, manifest['files'][key]) for key in ('index', 'embeddings')]
        # Before the sha256 check: a change from here on is a change under the loaded index.
        states = {path: _file_state(path) for path in paths if osp.isfile(path)}
        check_files(directory, manifest, ('index', 'embeddings'))
        stored = read_index_rows(directory, manifest)
        self = cls(manifest['factory'], device=device, gpu_temp_memory=gpu_temp_memory,
                   k_factor=manifest.get('k_factor', 1) if k_factor is None else k_factor,
                   identity=stored.identity)
        self.faiss_index = FaissIndex.load(
            osp.join(directory, manifest['files']['index']), factory=manifest['factory'],
            nprobe=nprobe, device=device, gpu_temp_memory=gpu_temp_memory)
        self.rows, self.ids = stored.embeddings, list(stored.ids)
        self.root, self.build_info = manifest['root'], manifest.get('build')
        self._files = states
        counts = dict(ids=len(self.ids), embeddings=len(self.rows),
                      indexed=len(self.faiss_index), manifest=manifest.get('count', len(stored)))
        if len(set(counts.values())) > 1:
            raise IndexIntegrityError(
                osp.join(directory, MANIFEST), f'index {directory} is inconsistent: '
                + ', '.join(f'{v} {k}' for k, v in counts.items())
                + ' (expected as many of each): rebuild the index')
        return self


def search_reranked(faiss_index: FaissIndex, rows: np.ndarray, queries: np.ndarray, k: int,
                    k_factor: int) -> Tuple[np.ndarray, np.ndarray]:
    """``faiss_index.search(queries, k)``, its ``k_factor`` x k candidates re-ranked exactly
    against ``rows`` (:func:`rerank_exactly`) when ``k_factor`` > 1. On a GPU at most the
    FAISS_GPU_MAX_K that faiss-gpu selects (never fewer than k): the first search so cut
    warns and is recorded as ``faiss_index.capped``, since its recall differs from the CPU's."""
    if k_factor == 1:
        return faiss_index.search(queries, k)
    asked = searched = min(k * k_factor, len(rows))
    if on_gpu(faiss_index.index):
        searched = max(k, min(asked, FAISS_GPU_MAX_K))
    if searched < asked and faiss_index.capped is None:
        faiss_index.capped = dict(asked=asked, searched=searched, k=k, k_factor=k_factor)
        warnings.warn(f'faiss on the GPU selects at most {FAISS_GPU_MAX_K} candidates: '
                      f're-ranking {searched} of the k_factor x k = {asked} asked (k={k}), so '
                      "recall can be below the CPU's and the recall a build measured (an "
                      "index's manifest, build.recall_at_10); a smaller k or k_factor, or "
                      "device='cpu', re-ranks them all (said once per index)")
    return rerank_exactly(rows, queries, faiss_index.search(queries, searched)[1], k)


def rerank_exactly(rows: np.ndarray, queries: np.ndarray, candidates: np.ndarray, k: int,
                   chunk: int = 1024, memory: int = RERANK_MEMORY) -> Tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each query's ``candidates`` by exact inner product.

    Args:
        rows: N x D (of a memory map, only the candidates' rows are read, each once a block).
        queries: nq x D; candidates: nq x c positions into ``rows`` (-1: none), c >= k.
        chunk: queries scored at once at most.
        memory: bytes a block of queries holds at most (its candidates' rows, read and then
            gathered per query: 2 x queries x c x D floats; at least one query a block).

    Returns:
        (nq x k inner products, nq x k positions), best first, equal scores in the
        candidates' order; -inf and -1 where a query has fewer than k candidates.
    """
    per_query = 2 * candidates.shape[1] * queries.shape[1] * np.dtype(np.float32).itemsize
    block = int(max(1, min(chunk, memory // max(per_query, 1))))
    scores, positions = [], []
    for lo in range(0, len(candidates), block):
        part = candidates[lo:lo + block]
        wanted = np.unique(part[part >= 0])
        held = read_rows(rows, wanted).astype(np.float32, copy=False)
        where = np.searchsorted(wanted, np.maximum(part, 0))
        sims = np.einsum('qcd,qd->qc', held[where], queries[lo:lo + block],
                         dtype=np.float32) if len(wanted) else np.zeros(part.shape, np.float32)
        sims[part < 0] = -np.inf
        best, columns = stable_topk(torch.from_numpy(sims), k)
        scores.append(best.numpy())
        positions.append(np.take_along_axis(part, columns.numpy(), 1))
    scores = np.concatenate(scores) if scores else np.zeros((0, k), np.float32)
    positions = np.concatenate(positions) if positions else np.zeros((0, k), np.int64)
    positions[scores == -np.inf] = -1
    return scores, positions


def read_rows(rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``rows[positions]``. Of a memory-mapped file's rows, read with ``os.preadv`` and no
    read-ahead, not through the map: a page fault maps and reads ahead pages around the one
    asked for, and every page mapped counts in the resident memory. The positions are read
    sorted, each once, a run of consecutive rows in one call: a Python call per row costs
    more than reading it."""
    whole = isinstance(rows, np.memmap) and isinstance(rows.base, mmap.mmap) \
        and rows.flags.c_contiguous and rows.ndim == 2 and getattr(rows, 'filename', None)
    positions = np.asarray(positions, np.int64)
    if not whole or not osp.isfile(rows.filename) or not len(positions):  # gone since mapped:
        return np.asarray(rows[positions])  # the map still reads it
    wanted, inverse = np.unique(positions, return_inverse=True)
    size = rows.strides[0]
    out = np.empty((len(wanted), rows.shape[1]), rows.dtype)
    # A run ends before a gap, or at _READ_SPAN bytes from where it started.
    gap = np.diff(wanted) != 1
    first_of_run = wanted[np.concatenate([[0], np.flatnonzero(gap) + 1])][
        np.concatenate([[0], np.cumsum(gap)])]
    piece = (wanted - first_of_run) // max(1, _READ_SPAN // size)
    bounds = np.concatenate([[0], np.flatnonzero(gap | (np.diff(piece) != 0)) + 1,
                             [len(wanted)]])
    view = memoryview(out.reshape(-1).view(np.uint8))
    with open(rows.filename, 'rb', buffering=0) as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        for lo, hi, first in zip(bounds[:-1].tolist(), bounds[1:].tolist(),
                                 wanted[bounds[:-1]].tolist()):
            at = rows.offset + first * size
            if os.preadv(f.fileno(), [view[lo * size:hi * size]], at) != (hi - lo) * size:
                raise OSError(f'{rows.filename}: rows {first}-{first + hi - lo - 1} (bytes '
                              f'{at}-{at + (hi - lo) * size}) are past the end of the file: '
                              'it was cut short since it was opened')
    return out if len(wanted) == len(positions) and (wanted == positions).all() \
        else out[inverse.reshape(-1)]


def read_manifest(directory: str) -> dict:
    """``directory/manifest.json``, checked to be of the format this irtbox reads."""
    path = osp.join(directory, MANIFEST)
    if not osp.isfile(path):
        raise NotAnIndexError(f'{directory} is not an irtbox index (no {MANIFEST})')
    try:
        manifest = read_json(path)
    except ValueError as err:
        raise IndexIntegrityError(path, f'{path} is not valid JSON: {err}') from err
    if not isinstance(manifest, dict):
        raise IndexIntegrityError(path, f'{path}: a JSON {type(manifest).__name__}; expected an '
                                  'object (the manifest ImageSearcher.save writes): rebuild '
                                  'the index')
    if manifest.get('format_version') != FORMAT_VERSION:
        raise IndexIntegrityError(path, f'{path}: index format '
                                  f'{manifest.get("format_version")!r}, this irtbox reads format '
                                  f'{FORMAT_VERSION}: rebuild the index')
    missing = [k for k in ('factory', 'dim', 'files', 'root', 'sha256') if k not in manifest]
    missing += [f'files.{k}' for k in ('index', 'embeddings') if k not in manifest.get('files', {})]
    if missing:
        raise IndexIntegrityError(path, f'{path}: no {", ".join(missing)}; expected a manifest '
                                  'written by ImageSearcher.save: rebuild the index')
    return manifest


def check_files(directory: str, manifest: dict, keys: Sequence[str]) -> None:
    """The files ``manifest['files'][key]`` checked against the sha256 the manifest records."""
    for key in keys:
        name = manifest['files'].get(key)
        if name is None:
            continue
        path = osp.join(directory, name)
        if not osp.isfile(path):
            raise IndexIntegrityError(path, f'index {directory}: {path} is missing '
                                      '(manifest.json names it): rebuild the index')
        if name not in manifest['sha256']:
            raise IndexIntegrityError(path, f'{osp.join(directory, MANIFEST)}: no sha256 '
                                      f'recorded for {name}: rebuild the index')
        if sha256sum(path) != manifest['sha256'][name]:
            raise IndexIntegrityError(
                path, f'{path}: its sha256 is not the one {MANIFEST} records; the file was '
                'edited or damaged (cut short, overwritten) since the index was saved, and its '
                'results cannot be trusted: rebuild the index')


def read_index_rows(directory: str, manifest: dict) -> EmbeddingSet:
    """The stored rows of the index in ``directory``: embeddings (memory-mapped), ids and
    the model's identity."""
    path = osp.join(directory, manifest['files']['embeddings'])
    rows = load_embeddings(path)
    if rows.ids is None:
        raise IndexIntegrityError(path, f'{path}: no ids; expected the embeddings file of an '
                                  'index (ImageSearcher.save): rebuild the index')
    return rows


def _file_state(path: str) -> tuple:
    """What tells a file changed: (device, inode, size, modification time in ns)."""
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _manifest_names(directory: str, files: dict) -> bool:
    """Whether ``directory``'s manifest names ``files``."""
    try:
        return read_json(osp.join(directory, MANIFEST)).get('files') == files
    except (OSError, ValueError, AttributeError):
        return False

