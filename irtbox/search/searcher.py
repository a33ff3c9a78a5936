"""``ImageSearcher``: embed a collection with a retrieval model, index it with faiss, search it,
save it and load it back.

An index folder (format 2) holds ``manifest.json`` (format_version, factory, nprobe, k_factor,
dim, count and the names of the files below), the faiss index ``index-<tag>.faiss``, the rows as one
embeddings file ``embeddings-<tag>.npz`` (embeddings, ids, the model's identity:
:mod:`irtbox.structures.embeddings_file`, read memory-mapped) and the model's config
``config-<tag>.py``, and ``root``: the absolute folder that relative paths (image ids, the
checkpoint in the identity) are relative to, the working directory of the save; so an index is
searched, and its images and checkpoint found, from any folder. The manifest records the
sha256 of each of these files (``sha256``: {name: digest}); loading checks them, so an index
edited or damaged since it was saved (rows reordered, a file cut short) is refused, naming the
file, rather than searched.
"""
import dataclasses
import hashlib
import json
import os
import os.path as osp
import re
import uuid
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.logging import print_log

from irtbox.apis.identity import model_identity, model_identity_differences
from irtbox.evaluation.functional.knn import knn
from irtbox.evaluation.functional.checks import non_finite_rows
from irtbox.evaluation.neighbours.faiss_index import (FAISS_GPU_MAX_K, FaissIndex,
                                                     IndexIntegrityError, on_gpu)
from irtbox.structures.embeddings_file import EmbeddingSet, load_embeddings, save_embeddings
from irtbox.utils.fileio import atomic_write, atomic_write_text

__all__ = ['IndexMismatchError', 'IndexIntegrityError', 'CheckpointMovedError', 'SearchHit',
           'ImageSearcher', 'load_index_model', 'rerank_exactly', 'read_rows']

MANIFEST = 'manifest.json'
# What save() writes besides the manifest (named by a random tag per save), and the
# temporary files of a save that was killed.
_DATA_NAMES = r'(index-\w+\.faiss|embeddings-\w+\.npz|config-\w+\.py)'
_DATA_FILE = re.compile(rf'^({_DATA_NAMES}|\.({_DATA_NAMES}|manifest\.json)\.\w+\.tmp(\.\w+)?)$')
FORMAT_VERSION = 2


class IndexMismatchError(ValueError):
    """An index loaded with a model other than the one that built it."""


class CheckpointMovedError(FileNotFoundError):
    """The checkpoint an index was built with is no longer where the index recorded it;
    ``checkpoint`` is that path."""

    def __init__(self, directory: str, checkpoint: str):
        self.checkpoint = checkpoint
        super().__init__(f'index {directory} was built with checkpoint {checkpoint}, which is '
                         'not there any more (moved or deleted)')


@dataclasses.dataclass(frozen=True)
class SearchHit:
    """One result: its rank (1 = best), the item's id (e.g. its path), the cosine similarity
    and its position in the index (what the web page asks thumbnails by)."""
    rank: int
    id: str
    score: float
    position: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _l2_normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32)


def _as_float32(items) -> np.ndarray:
    """An array of embeddings given as a NumPy array or a torch tensor (on any device,
    with autograd, of any float dtype), as float32 NumPy."""
    if isinstance(items, torch.Tensor):
        return items.detach().float().cpu().numpy()
    return np.asarray(items, dtype=np.float32)


def _is_embedding_batch(items) -> bool:
    if isinstance(items, torch.Tensor):
        return items.is_floating_point() and items.dim() in (1, 2)
    return isinstance(items, np.ndarray) and items.dtype.kind == 'f' and items.ndim in (1, 2)


class ImageSearcher:
    """A searchable collection: ids + the embeddings + the model's identity, around one
    :class:`~irtbox.evaluation.neighbours.faiss_index.FaissIndex` (``faiss_index``), which
    adds, searches, saves, loads and places the faiss index.

    Similarity is the cosine: embeddings (and queries) are L2-normalised, the index is an
    inner-product one. ``factory='Flat'`` is exact; any faiss factory string
    (``'IVF1024,Flat'``, ``'IVF4096,PQ32'``, ``'HNSW32'``) gives an approximate index,
    trained on the first vectors added (:meth:`recall_vs_exact` measures what it loses).

    Args:
        model: a retriever from ``init_model`` / ``get_model``; needed to add or search
            images (embeddings work without one). Constructing does not run it: its identity
            (a hash of its weights and one forward, :attr:`identity`) is computed once, when
            first needed (saving, the dimension of an empty searcher).
        factory, device, nprobe, gpu_temp_memory: the ``FaissIndex``'s settings: the
            faiss factory string; ``'cuda'`` (the current CUDA device) or ``'cuda:N'`` for the
            GPU when faiss has GPU support (index types faiss has no GPU version of, HNSW
            and plain PQ, stay on the CPU with a warning), ``None`` the CPU; IVF lists
            visited per query (default 16 for an IVF index; an index without lists refuses
            one); bytes of scratch memory faiss reserves on the GPU (default: faiss's own).
        k_factor: re-rank: an approximate index returns ``k_factor`` x k candidates, which
            are scored again exactly against the stored embeddings (read from the memory-mapped
            file of a loaded index: k_factor x k rows a query) and the best k kept
            (:func:`rerank_exactly`); 1: the index's own scores and order. Quantised codes
            (``SQ8``, ``PQ``) misorder near-ties; re-ranking puts the true neighbours the
            lists hold back in their places.
        batch_size, num_workers: for embedding images.
        identity: the model's identity when already computed (e.g. the ``identity`` of the
            :class:`~irtbox.structures.EmbeddingSet` its embeddings came in).

    Attributes:
        root: the folder that relative ids (image paths) are relative to: None (the working
            directory) until the index is saved, then the absolute one recorded in its manifest
            (:meth:`path_of` joins them).
    """

    def __init__(self, model: Optional[torch.nn.Module] = None, factory: str = 'Flat',
                 device: Optional[str] = None, batch_size: int = 32, num_workers: int = 0,
                 nprobe: Optional[int] = None, gpu_temp_memory: Optional[int] = None,
                 identity: Optional[dict] = None, k_factor: int = 1):
        if isinstance(k_factor, bool) or not isinstance(k_factor, (int, np.integer)) \
                or k_factor < 1:
            raise ValueError(f'ImageSearcher: k_factor must be a positive integer, got '
                             f'{k_factor!r}')
        self.model = model
        self.k_factor = int(k_factor)
        self.faiss_index = FaissIndex(factory, nprobe=nprobe, device=device,
                                      gpu_temp_memory=gpu_temp_memory)
        self.batch_size, self.num_workers = batch_size, num_workers
        self._identity = identity
        self.root: Optional[str] = None
        self.ids: List[str] = []
        self.embeddings = np.zeros((0, 0), dtype=np.float32)
        # Saved with the index: the model's config where there is no model (an index built
        # from an extraction's embeddings) and what its build measured (manifest 'build').
        self.config = None
        self.build_info: Optional[dict] = None

    def __len__(self) -> int:
        return len(self.ids)

    def path_of(self, item: Union[int, str]) -> str:
        """The file of an id (or of the item at a position): an absolute id as it is, a
        relative one joined to :attr:`root` (the working directory while there is none)."""
        item = self.ids[item] if isinstance(item, (int, np.integer)) else item
        return osp.join(self.root, item) if self.root and not osp.isabs(item) else item

    @property
    def factory(self) -> str:
        """The faiss factory string of the index."""
        return self.faiss_index.factory

    @property
    def index(self):
        """The faiss index itself (None until items are added), to inspect or tune."""
        return self.faiss_index.index

    @property
    def identity(self) -> Optional[dict]:
        """The identity of the model whose embeddings these are
        (:func:`~irtbox.apis.identity.model_identity`): computed from :attr:`model` the first
        time it is asked for, then kept; the stored one for a loaded index without a model;
        None when there is neither."""
        if self._identity is None and self.model is not None:
            self._identity = model_identity(self.model)
        return self._identity

    @identity.setter
    def identity(self, value: Optional[dict]) -> None:
        self._identity = value

    @property
    def dim(self) -> Optional[int]:
        """D of the embeddings: those held, else the model's (its identity), else None."""
        return self.embeddings.shape[1] if len(self.ids) else (
            self.identity or {}).get('embedding_dim')

    # Adding.

    def embed(self, images, progress: bool = True):
        """(N x D embeddings, ids, failed) of images: a folder, paths or HxWx3 RGB arrays."""
        if self.model is None:
            raise ValueError('ImageSearcher: embedding images needs a model; build the '
                             'searcher with model=init_model(CONFIG, CKPT) or load it with '
                             'model=...')
        from irtbox.apis.extract import extract_features
        result = extract_features(self.model, images, batch_size=self.batch_size,
                                  num_workers=self.num_workers, progress=progress,
                                  identity=False)
        return result.embeddings, list(result.ids), list(result.failed)

    def add(self, items, ids: Optional[Sequence[str]] = None, progress: bool = True) -> int:
        """Add images (a folder, paths, RGB arrays) or an N x D embedding array; returns the
        number added. Ids must be unique (for images: their paths)."""
        given = _is_embedding_batch(items)
        if given:
            embeddings = np.atleast_2d(_as_float32(items))
            if ids is None:
                ids = [str(i) for i in range(len(self.ids), len(self.ids) + len(embeddings))]
        else:
            embeddings, found, failed = self.embed(items, progress)
            if ids is None:
                # Paths relative to another folder than the index's root: made absolute, so
                # that path_of finds them.
                here = self.root is not None and osp.abspath(self.root) != os.getcwd()
                ids = [osp.abspath(i) if here and isinstance(i, str) else i for i in found]
        ids = [str(i) for i in ids]
        if len(ids) != len(embeddings):
            raise ValueError(f'ImageSearcher.add: {len(embeddings)} embeddings but {len(ids)} ids')
        if not len(ids):
            return 0
        # Those of the model itself need no check against its dimension (its identity).
        dim = self.dim if len(self.ids) or given else None
        if dim is not None and embeddings.shape[1] != dim:
            raise ValueError(f'ImageSearcher.add: {embeddings.shape[1]}-d embeddings, the index '
                             f'holds {dim}-d ones')
        bad = [ids[i] for i in non_finite_rows(embeddings)]
        if bad:
            raise ValueError(f'ImageSearcher.add: {len(bad)} of {len(ids)} embeddings are not '
                             f'finite (NaN or inf): {bad[:5]}; they would make the index useless')
        seen, repeated = set(self.ids), []
        for i in ids:
            if i in seen:
                repeated.append(i)
            seen.add(i)
        if repeated:
            raise ValueError(f'ImageSearcher.add: ids already in the index or repeated: '
                             f'{repeated[:5]} ({len(repeated)} in all)')
        embeddings = _l2_normalize(embeddings)
        self.faiss_index.add(embeddings)
        self.embeddings = embeddings if not len(self.ids) else np.concatenate(
            [self.embeddings, embeddings])
        self.ids += ids
        return len(ids)

    # Searching.

    def _query_embeddings(self, queries) -> Tuple[np.ndarray, bool]:
        """(nq x D normalised embeddings, whether a single query was given)."""
        if _is_embedding_batch(queries):
            array = _as_float32(queries)
            return _l2_normalize(np.atleast_2d(array)), array.ndim == 1
        single = isinstance(queries, str) or (isinstance(queries, np.ndarray) and
                                              queries.ndim == 3)
        items = [queries] if single else list(queries)
        if single and isinstance(queries, str) and osp.isdir(queries):
            raise ValueError(f'ImageSearcher.search: {queries} is a folder; give image files')
        embeddings, _, failed = self.embed(items, progress=False)
        if failed:
            raise ValueError('ImageSearcher.search: cannot read query image(s): ' +
                             '; '.join(f'{path}: {reason}' for path, reason in failed))
        return _l2_normalize(embeddings), single

    def search(self, queries, k: int = 10) -> Union[List[SearchHit], List[List[SearchHit]]]:
        """The ``k`` best items for each query: an image path or RGB array, a D-vector, or a
        list / N x D array of them. One query gives one list of hits; several, a list of
        lists, best first.

        An index on the GPU returns at most 2048 hits per query (faiss-gpu's limit): a
        larger ``k`` is a :class:`~irtbox.evaluation.neighbours.faiss_index.GpuTopKError`
        (a ValueError), rather than a silent move of the whole index to the CPU; search on
        the CPU (``device='cpu'``) for more."""
        if not len(self.ids):
            raise ValueError('ImageSearcher.search: the index is empty; add images first')
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f'ImageSearcher.search: k must be a positive integer, got {k!r}')
        embeddings, single = self._query_embeddings(queries)
        if embeddings.shape[1] != self.dim:
            raise ValueError(f'ImageSearcher.search: {embeddings.shape[1]}-d queries, the index '
                             f'holds {self.dim}-d embeddings')
        scores, positions = self.search_positions(embeddings, int(min(k, len(self.ids))))
        hits = [[SearchHit(rank=r + 1, id=self.ids[p], score=float(s), position=int(p))
                 for r, (s, p) in enumerate((s, p) for s, p in zip(row_s, row_p) if p >= 0)]
                for row_s, row_p in zip(scores, positions)]
        return hits[0] if single else hits

    def search_positions(self, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """(nq x k similarities, nq x k positions, -1 where fewer were found) of the nq x D
        normalised float32 ``queries``: the index's, re-ranked exactly when ``k_factor`` > 1."""
        if self.k_factor == 1:
            return self.faiss_index.search(queries, k)
        wanted = min(k * self.k_factor, len(self.ids))
        if on_gpu(self.faiss_index.index):  # faiss-gpu selects at most 2048: fewer candidates
            wanted = max(k, min(wanted, FAISS_GPU_MAX_K))
        _, candidates = self.faiss_index.search(queries, wanted)
        return rerank_exactly(self.embeddings, queries, candidates, k)

    def recall_vs_exact(self, k: int = 10, num_queries: int = 1000, seed: int = 0) -> float:
        """Mean fraction of the exact top-``k`` that the index returns, for a seeded sample of
        the stored embeddings used as queries (1.0 for the exact ``Flat`` index)."""
        if not len(self.ids):
            raise ValueError('ImageSearcher.recall_vs_exact: the index is empty')
        k = int(min(k, len(self.ids)))
        rng = np.random.default_rng(seed)
        sample = rng.choice(len(self.ids), size=min(num_queries, len(self.ids)), replace=False)
        queries = self.embeddings[np.sort(sample)]
        _, exact = knn(queries, self.embeddings, k, normalize=False)
        _, approx = self.search_positions(queries, k)
        return float(np.mean([len(set(a) & set(e)) / k for a, e in zip(approx, exact)]))

    # Saving and loading.

    def save(self, directory: str) -> None:
        """Write the index into ``directory`` (format 2: see the module's docstring) so that a
        crash at any moment leaves the previous save readable: the data files get new names
        (each written whole or not at all, :func:`~irtbox.utils.fileio.atomic_write`), then
        ``manifest.json`` (which names them and records their sha256) is replaced in one
        rename, then the old files are removed. A write that fails (a full disk) raises an
        ``OSError`` naming the file and leaves the folder as it was, the temporary files
        removed."""
        os.makedirs(directory, exist_ok=True)
        self.root = osp.abspath(self.root or os.getcwd())
        tag = uuid.uuid4().hex[:12]
        files = dict(index=f'index-{tag}.faiss', embeddings=f'embeddings-{tag}.npz')
        cfg = getattr(self.model, 'cfg', None) or self.config
        if cfg is not None:  # so that a query needs only the index folder (and the checkpoint)
            files['config'] = f'config-{tag}.py'
        try:
            self._write_files(directory, files)
        except BaseException:  # a full disk, an interrupt: this save's files go, the last stays
            if not _manifest_names(directory, files):  # (unless the new manifest is in place)
                for name in files.values():
                    if osp.exists(osp.join(directory, name)):
                        os.remove(osp.join(directory, name))
            raise
        # The previous save's files, and any a killed save left behind.
        for name in os.listdir(directory):
            if _DATA_FILE.match(name) and name not in files.values():
                os.remove(osp.join(directory, name))

    def _write_files(self, directory: str, files: dict) -> None:
        """The data files named in ``files``, then the manifest that names them."""
        if 'config' in files:
            cfg = getattr(self.model, 'cfg', None) or self.config
            atomic_write(osp.join(directory, files['config']), cfg.dump)
        self.faiss_index.save(osp.join(directory, files['index']), self.dim or 1)
        dim = self.dim
        embeddings = self.embeddings if len(self.ids) else np.zeros((0, dim or 0), np.float32)
        save_embeddings(osp.join(directory, files['embeddings']),
                        EmbeddingSet(embeddings, ids=list(self.ids), identity=self.identity))
        manifest = dict(format_version=FORMAT_VERSION, factory=self.factory, dim=dim,
                        count=len(self.ids), nprobe=self.faiss_index.nprobe,
                        k_factor=self.k_factor, files=files,
                        root=osp.abspath(self.root or os.getcwd()),
                        sha256={name: _sha256(osp.join(directory, name))
                                for name in files.values()})
        if self.build_info is not None:
            manifest['build'] = self.build_info
        atomic_write_text(osp.join(directory, MANIFEST), json.dumps(manifest, indent=1))

    @classmethod
    def load(cls, directory: str, model: Optional[torch.nn.Module] = None,
             device: Optional[str] = None, **kwargs) -> 'ImageSearcher':
        """The searcher saved in ``directory``, its embeddings memory-mapped (read-only), and
        on the CPU an IVF index's lists too (:meth:`FaissIndex.load
        <irtbox.evaluation.neighbours.faiss_index.FaissIndex.load>`). With ``model``, the
        model must be the one that built the index (same weights, preprocessing, embedding
        size); otherwise an :class:`IndexMismatchError` names what differs. ``kwargs`` go to
        the constructor (e.g. ``nprobe``, by default the one saved; ``k_factor``, by default
        the one saved, else 1; ``gpu_temp_memory``).

        Raises :class:`IndexIntegrityError` (a ValueError) naming the file when the manifest
        is not one this irtbox reads, a file's sha256 is not the one the manifest records,
        or faiss cannot read the index file."""
        manifest = _read_manifest(directory)
        _check_files(directory, manifest, ('index', 'embeddings'))
        rows = _read_rows(directory, manifest)
        kwargs.setdefault('k_factor', manifest.get('k_factor', 1))
        searcher = cls(model=None, factory=manifest['factory'], device=device, **kwargs)
        searcher.identity = rows.identity
        searcher.root = manifest['root']
        if model is not None:
            current = model_identity(model)
            if searcher.identity is not None:
                differences = model_identity_differences(searcher.identity, current)
                if differences:
                    raise IndexMismatchError(
                        f'index {directory} was built by another model ('
                        f'{searcher.identity.get("config")}, {searcher.identity.get("checkpoint")}'
                        f'); it differs in: ' + '; '.join(differences))
            elif current['embedding_dim'] != manifest['dim']:
                raise IndexMismatchError(f'index {directory} holds {manifest["dim"]}-d embeddings, '
                                         f'the model makes {current["embedding_dim"]}-d ones')
            searcher.model, searcher.identity = model, current
        settings = searcher.faiss_index
        searcher.faiss_index = FaissIndex.load(
            osp.join(directory, manifest['files']['index']), factory=settings.factory,
            nprobe=settings.nprobe, device=settings.device,
            gpu_temp_memory=settings.gpu_temp_memory)
        searcher.build_info = manifest.get('build')
        searcher.embeddings, searcher.ids = rows.embeddings, list(rows.ids)
        counts = dict(ids=len(searcher.ids), embeddings=len(searcher.embeddings),
                      indexed=len(searcher.faiss_index), manifest=manifest.get('count', len(rows)))
        if len(set(counts.values())) > 1:
            raise IndexIntegrityError(
                osp.join(directory, MANIFEST), f'index {directory} is inconsistent: '
                + ', '.join(f'{v} {k}' for k, v in counts.items())
                + ' (expected as many of each): rebuild the index')
        print_log(f'loaded index {directory}: {len(searcher)} items, {manifest["factory"]}',
                  logger='current')
        return searcher


def rerank_exactly(rows: np.ndarray, queries: np.ndarray, candidates: np.ndarray,
                   k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each query's ``candidates`` by exact inner product.

    Args:
        rows: N x D stored embeddings (of a memory map, the candidates' rows only are read,
            each once: :func:`read_rows`).
        queries: nq x D; candidates: nq x c positions into ``rows`` (-1: none), c >= k.

    Returns:
        (nq x k inner products, nq x k positions), best first; -inf and -1 where a query has
        fewer than k candidates. Equal scores keep the candidates' order.
    """
    wanted = np.unique(candidates[candidates >= 0])
    block = read_rows(rows, wanted).astype(np.float32, copy=False)
    where = np.searchsorted(wanted, np.maximum(candidates, 0))
    scores = np.einsum('qcd,qd->qc', block[where], queries, dtype=np.float32) \
        if len(wanted) else np.zeros(candidates.shape, np.float32)
    scores[candidates < 0] = -np.inf
    best = np.argsort(-scores, axis=1, kind='stable')[:, :k]
    scores, positions = np.take_along_axis(scores, best, 1), np.take_along_axis(candidates, best, 1)
    positions[scores == -np.inf] = -1
    return scores, positions


def read_rows(rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``rows[positions]`` (sorted positions). Of a memory-mapped file's rows (an
    ``np.memmap`` of a whole file's array, as an index folder's embeddings are loaded), read
    with ``os.preadv`` and no read-ahead (``POSIX_FADV_RANDOM``), not through the map: a
    page fault maps 16 pages and more around the one asked for, reads ahead up to the disk's
    read-ahead (8 MB on some virtual disks), and every page it maps counts in the process's
    resident memory. 1,000 queries re-ranked over 1M rows mapped the whole 1.5 GB file."""
    import mmap
    whole = isinstance(rows, np.memmap) and isinstance(rows.base, mmap.mmap) \
        and rows.flags.c_contiguous and rows.ndim == 2 and getattr(rows, 'filename', None)
    if not whole or not osp.isfile(rows.filename):  # gone since mapped: the map still reads it
        return np.asarray(rows[positions])
    out = np.empty((len(positions), rows.shape[1]), rows.dtype)
    size = rows.strides[0]
    views = memoryview(out.reshape(len(positions), -1).view(np.uint8)).cast('B')
    with open(rows.filename, 'rb', buffering=0) as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        for i, position in enumerate(positions.tolist()):
            at = rows.offset + position * size
            if os.preadv(f.fileno(), [views[i * size:(i + 1) * size]], at) != size:
                raise OSError(f'{rows.filename}: row {position} (byte {at}) is past the end '
                              'of the file: it was cut short since it was opened')
    return out


def load_index_model(directory: str, checkpoint: Optional[str] = None,
                     device: str = 'cpu') -> torch.nn.Module:
    """The model that built the index in ``directory``: its saved config and the checkpoint
    recorded at build time (or ``checkpoint``), verified against the index when loaded.
    A recorded checkpoint that is not there any more is a :class:`CheckpointMovedError`."""
    from irtbox.apis import init_model
    manifest = _read_manifest(directory)
    if 'config' not in manifest['files']:
        raise ValueError(f'index {directory} was built from embeddings, without a model; '
                         'query it with embeddings')
    # The config runs as Python: checked first. The rows (read here for the checkpoint's
    # path) are checked when the index is loaded, before any search.
    _check_files(directory, manifest, ('config',))
    identity = _read_rows(directory, manifest).identity or {}
    if checkpoint is None and identity.get('checkpoint') is not None:
        recorded, root = identity['checkpoint'], manifest['root']
        # A relative path is the build's: relative to its working directory (the root).
        checkpoint = recorded if '://' in recorded or not root else osp.join(root, recorded)
        if '://' not in checkpoint and not osp.isfile(checkpoint):
            raise CheckpointMovedError(directory, checkpoint)
    elif checkpoint is not None and not osp.isfile(checkpoint) and '://' not in checkpoint:
        raise FileNotFoundError(f'checkpoint {checkpoint} not found')
    return init_model(osp.join(directory, manifest['files']['config']), checkpoint,
                      device=device)


def _read_manifest(directory: str) -> dict:
    """``directory/manifest.json``, checked to be of the format this irtbox reads."""
    path = osp.join(directory, MANIFEST)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{directory} is not an irtbox index (no {MANIFEST})')
    try:
        with open(path) as f:
            manifest = json.load(f)
    except ValueError as err:
        raise IndexIntegrityError(path, f'{path} is not valid JSON: {err}') from err
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


def _manifest_names(directory: str, files: dict) -> bool:
    """Whether ``directory``'s manifest names ``files``."""
    try:
        with open(osp.join(directory, MANIFEST)) as f:
            return json.load(f).get('files') == files
    except (OSError, ValueError, AttributeError):
        return False


def _sha256(path: str) -> str:
    with open(path, 'rb') as f:
        return hashlib.file_digest(f, 'sha256').hexdigest()


def _check_files(directory: str, manifest: dict, keys: Sequence[str]) -> None:
    """The files ``manifest['files'][key]`` of ``directory`` checked against the sha256 the
    manifest records: IndexIntegrityError naming the first that is missing or differs."""
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
        if _sha256(path) != manifest['sha256'][name]:
            raise IndexIntegrityError(
                path, f'{path}: its sha256 is not the one {MANIFEST} records; the file was '
                'edited or damaged (cut short, overwritten) since the index was saved, and its '
                'results cannot be trusted: rebuild the index')


def _read_rows(directory: str, manifest: dict) -> EmbeddingSet:
    """The rows of the index: embeddings (memory-mapped), ids and the model's identity."""
    path = osp.join(directory, manifest['files']['embeddings'])
    rows = load_embeddings(path)
    if rows.ids is None:
        raise IndexIntegrityError(path, f'{path}: no ids; expected the embeddings file of an '
                                  'index (ImageSearcher.save): rebuild the index')
    return rows
