"""``ImageSearcher``: a retrieval model and the :class:`~irtbox.evaluation.neighbours.index.Index`
of a collection."""
import dataclasses
import json
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.logging import print_log

from irtbox.apis import init_model
from irtbox.apis.extract import extract_features
from irtbox.apis.identity import model_identity, model_identity_differences
from irtbox.evaluation.functional.neighbour_graph import (StaleGraphError, load_neighbour_graph,
                                                          save_neighbour_graph)
from irtbox.evaluation.functional.rerankers import check_rerank_cfg, rerank, rerank_graph
from irtbox.evaluation.neighbours.faiss_index import IndexIntegrityError
from irtbox.evaluation.neighbours.index import (Index, IndexFileChangedError, IndexFolderBusy,
                                               RowsError, check_files, index_folder_lock,
                                               normalize, read_index_rows, read_manifest,
                                               read_rows, rerank_exactly)
from irtbox.utils.checks import check_positive_int
from irtbox.utils.config import Config, ConfigError, config_from_data
from irtbox.utils.dist import resolve_device
from irtbox.utils.errors import IrtboxError

__all__ = ['IndexMismatchError', 'IndexIntegrityError', 'IndexFolderBusy', 'IndexFileChangedError',
           'CheckpointMovedError', 'UntrustedConfigError', 'SearchHit', 'ImageSearcher',
           'load_index_model', 'rerank_exactly', 'read_rows']


class IndexMismatchError(IrtboxError, ValueError):
    """An index loaded with a model other than the one that built it."""


class CheckpointMovedError(IrtboxError, FileNotFoundError):
    """The checkpoint an index was built with (``checkpoint``) is no longer where recorded."""
    argument = 'checkpoint'

    def __init__(self, directory: str, checkpoint: str):
        self.checkpoint = checkpoint
        super().__init__(f'index {directory} was built with checkpoint {checkpoint}, which is '
                         'not there any more (moved or deleted)')


class UntrustedConfigError(IrtboxError, ValueError):
    """An index folder's config that loading would run as Python (an older irtbox's): used only
    when the caller names a config (``remedy``)."""
    remedy = dict(config='CONFIG')


class MissingFileError(IrtboxError, FileNotFoundError):
    """A file that the argument ``argument`` names and that is not there."""


class QueryError(IrtboxError, ValueError):
    """Queries that cannot be searched (a folder, unreadable images, another dimension), or
    images given to a searcher without a model."""


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


def _as_float32(items) -> np.ndarray:
    """A NumPy array or a torch tensor (any device, autograd, float dtype) as float32 NumPy."""
    if isinstance(items, torch.Tensor):
        return items.detach().float().cpu().numpy()
    return np.asarray(items, dtype=np.float32)


def _is_embedding_batch(items) -> bool:
    if isinstance(items, torch.Tensor):
        return items.is_floating_point() and items.dim() in (1, 2)
    return isinstance(items, np.ndarray) and items.dtype.kind == 'f' and items.ndim in (1, 2)


def _delegated(name: str, doc: str) -> property:
    return property(lambda self: getattr(self.store, name),
                    lambda self, value: setattr(self.store, name, value), doc=doc)


class ImageSearcher:
    """A searchable collection: a retrieval model (to embed images) and the
    :class:`~irtbox.evaluation.neighbours.index.Index` of its rows (``store``). Similarity is
    the cosine; ``factory='Flat'`` is exact, any other faiss factory string approximate
    (:meth:`recall_vs_exact` measures what it loses).

    Args:
        model: needed to add or search images (embeddings work without one); its identity
            is computed when first needed, not on construction.
        factory, nprobe, gpu_temp_memory, k_factor: the Index's.
        device: where the faiss index is searched (:func:`~irtbox.utils.dist.resolve_device`).
        identity: the model's identity when already computed.
        store: an Index already made; the settings above are then its.

    Attributes:
        config: the model's config saved with the index where there is no model.
    """
    ids = _delegated('ids', 'The N ids (image paths).')
    embeddings = _delegated('rows', 'The N x D stored, L2-normalised embeddings.')
    faiss_index = _delegated('faiss_index', 'The FaissIndex over the embeddings.')
    k_factor = _delegated('k_factor', 'Candidates re-ranked exactly: k_factor x k.')
    root = _delegated('root', 'The folder relative ids are relative to.')
    build_info = _delegated('build_info', "What a build measured (the manifest's 'build').")

    def __init__(self, model: Optional[torch.nn.Module] = None, factory: str = 'Flat',
                 device: Optional[str] = None, batch_size: int = 32, num_workers: int = 0,
                 nprobe: Optional[int] = None, gpu_temp_memory: Optional[int] = None,
                 identity: Optional[dict] = None, k_factor: int = 1,
                 store: Optional[Index] = None):
        self.model = model
        self.store = store or Index(factory, nprobe=nprobe, device=resolve_device(device),
                                    gpu_temp_memory=gpu_temp_memory, k_factor=k_factor,
                                    identity=identity)
        self.batch_size, self.num_workers = batch_size, num_workers
        self.config = None
        # The database graphs of the re-rankers used so far (add() drops them), and the index
        # folder they are saved in with the sha256 of its embeddings (load and save set it).
        self._rerank_graphs = {}
        self._folder: Optional[Tuple[str, str]] = None

    def __len__(self) -> int:
        return len(self.store)

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
        """The identity of the model whose embeddings these are, computed from :attr:`model`
        the first time it is asked for; the stored one for a loaded index without a model."""
        if self.store.identity is None and self.model is not None:
            self.store.identity = model_identity(self.model)
        return self.store.identity

    @identity.setter
    def identity(self, value: Optional[dict]) -> None:
        self.store.identity = value

    @property
    def dim(self) -> Optional[int]:
        """D of the embeddings: those held, else the model's (its identity), else None."""
        return self.store.dim or (self.identity or {}).get('embedding_dim')

    def embed(self, images, progress: bool = True):
        """(N x D embeddings, ids, failed) of images: a folder, paths or HxWx3 RGB arrays."""
        if self.model is None:
            raise QueryError('ImageSearcher: embedding images needs a model; build the '
                             'searcher with model=init_model(CONFIG, CKPT) or load it with '
                             'model=...')
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
                ids = [str(i) for i in range(len(self), len(self) + len(embeddings))]
        else:
            embeddings, found, _ = self.embed(items, progress)
            if ids is None:
                # Paths relative to another folder than the index's root: made absolute, so
                # that path_of finds them.
                here = self.root is not None and osp.abspath(self.root) != os.getcwd()
                ids = [osp.abspath(i) if here and isinstance(i, str) else i for i in found]
        # Given embeddings of an empty searcher are checked against the model's dimension.
        if given and not len(self) and len(embeddings) and self.dim is not None \
                and embeddings.shape[1] != self.dim:
            raise QueryError(f'ImageSearcher.add: {embeddings.shape[1]}-d embeddings, the '
                             f'index holds {self.dim}-d ones')
        try:
            self.store.add(embeddings, ids)
        except RowsError as err:
            raise RowsError(f'ImageSearcher.add: {err}') from None
        self._rerank_graphs.clear()
        self._folder = None
        return len(ids)

    def _query_embeddings(self, queries) -> Tuple[np.ndarray, bool]:
        """(nq x D embeddings, whether a single query was given)."""
        if _is_embedding_batch(queries):
            array = _as_float32(queries)
            return np.atleast_2d(array), array.ndim == 1
        single = isinstance(queries, str) or (isinstance(queries, np.ndarray) and
                                              queries.ndim == 3)
        items = [queries] if single else list(queries)
        if single and isinstance(queries, str) and osp.isdir(queries):
            raise QueryError(f'ImageSearcher.search: {queries} is a folder; give image files')
        embeddings, _, failed = self.embed(items, progress=False)
        if failed:
            raise QueryError('ImageSearcher.search: cannot read query image(s): ' +
                             '; '.join(f'{path}: {reason}' for path, reason in failed))
        return embeddings, single

    def search(self, queries, k: int = 10, rerank: Optional[dict] = None
               ) -> Union[List[SearchHit], List[List[SearchHit]]]:
        """The ``k`` best items for each query: an image path or RGB array, a D-vector, or a
        list / N x D array of them. One query gives one list of hits, best first; several, a
        list of lists. On the GPU, ``k`` above faiss-gpu's limit is a ``GpuTopKError``.
        ``rerank``: a re-ranker's dict, e.g. ``dict(type='superglobal')``
        (:meth:`rerank_positions`)."""
        if not len(self):
            raise QueryError('ImageSearcher.search: the index is empty; add images first')
        check_positive_int(k, 'k')
        embeddings, single = self._query_embeddings(queries)
        if embeddings.shape[1] != self.dim:
            raise QueryError(f'ImageSearcher.search: {embeddings.shape[1]}-d queries, the index '
                             f'holds {self.dim}-d embeddings')
        search = self.search_positions if rerank is None else \
            (lambda q, n: self.rerank_positions(q, n, rerank))
        scores, positions = search(normalize(embeddings), int(min(k, len(self))))
        hits = [[SearchHit(rank=r + 1, id=self.ids[p], score=float(s), position=int(p))
                 for r, (s, p) in enumerate((s, p) for s, p in zip(row_s, row_p) if p >= 0)]
                for row_s, row_p in zip(scores, positions)]
        return hits[0] if single else hits

    def search_positions(self, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """:meth:`Index.search <irtbox.evaluation.neighbours.index.Index.search>`."""
        return self.store.search(queries, k)

    def rerank_positions(self, queries: np.ndarray, k: int, cfg: dict
                         ) -> Tuple[np.ndarray, np.ndarray]:
        """The re-ranker ``cfg``'s shortlist from the index, re-ranked
        (:func:`~irtbox.evaluation.functional.rerankers.rerank`), its best ``k``: (scores,
        positions). The database graph a method needs is computed on first use and kept."""
        method, shortlist, params = check_rerank_cfg(cfg)
        scores, positions = self.search_positions(queries, int(min(max(k, shortlist), len(self))))
        if (positions < 0).any():
            raise QueryError(f'ImageSearcher.search: the index found fewer than {shortlist} '
                             f'candidates to re-rank; search more cells (nprobe)')
        positions, scores = rerank(cfg, queries, self.embeddings, positions, scores,
                                   self.rerank_graph(cfg))
        return scores[:, :k], positions[:, :k]

    def rerank_graph(self, cfg: dict):
        """The database graph the re-ranker ``cfg`` needs (``None``: none), computed on first
        use and kept; of an index saved or loaded, kept in its folder too, as
        ``rerank-graph-<type>.npz`` with the sha256 of the index's embeddings and the graph's
        settings: a later load reads it, and a graph of other rows or settings is refused
        (computed again and replaced). A folder another process holds, or one this process
        may not write, keeps its file; the graph is then only kept in memory."""
        method, _, params = check_rerank_cfg(cfg)
        meta = dict(type=method, k=params.get('k1' if method == 'kreciprocal' else 'k'),
                    graph=cfg.get('graph', {}))
        key = json.dumps(meta, sort_keys=True)
        if method == 'superglobal' or key in self._rerank_graphs:
            return self._rerank_graphs.get(key)
        graph = path = None
        if self._folder is not None:
            path, meta['rows'] = osp.join(self._folder[0], f'rerank-graph-{method}.npz'), \
                self._folder[1]
            if osp.isfile(path):
                try:
                    graph = load_neighbour_graph(path, meta)
                except StaleGraphError as err:
                    print_log(str(err), logger='current')
        if graph is None:
            graph = rerank_graph(cfg, self.embeddings)
            if path is not None:
                try:
                    with index_folder_lock(self._folder[0]):
                        save_neighbour_graph(path, graph, meta)
                except (IndexFolderBusy, OSError) as err:
                    print_log(f'the re-ranking graph is not saved in {self._folder[0]}: {err}',
                              logger='current')
        self._rerank_graphs[key] = graph
        return graph

    def recall_vs_exact(self, k: int = 10, num_queries: int = 1000, seed: int = 0) -> float:
        """The held-out recall@``k`` against exact search (:meth:`Index.recall_at_k
        <irtbox.evaluation.neighbours.index.Index.recall_at_k>`)."""
        if not len(self):
            raise QueryError('ImageSearcher.recall_vs_exact: the index is empty')
        return self.store.recall_at_k(k, num_queries, seed)

    def save(self, directory: str) -> None:
        """Write the index folder (:meth:`Index.save
        <irtbox.evaluation.neighbours.index.Index.save>`) with the model's config."""
        self.identity  # computed from the model if not yet: saved with the rows
        self.store.save(directory, getattr(self.model, 'cfg', None) or self.config)
        self._folder = _folder(directory)

    @classmethod
    def load(cls, directory: str, model: Optional[torch.nn.Module] = None,
             device: Optional[str] = None, batch_size: int = 32, num_workers: int = 0,
             **settings) -> 'ImageSearcher':
        """The searcher saved in ``directory`` (:meth:`Index.load
        <irtbox.evaluation.neighbours.index.Index.load>`; ``settings``: its ``nprobe``,
        ``k_factor``, ``gpu_temp_memory``). ``model`` must be the one that built the index,
        else an :class:`IndexMismatchError` names what differs."""
        store = Index.load(directory, device=resolve_device(device), **settings)
        if model is not None:
            current = model_identity(model)
            if store.identity is not None:
                differences = model_identity_differences(store.identity, current)
                if differences:
                    raise IndexMismatchError(
                        f'index {directory} was built by another model ('
                        f'{store.identity.get("config")}, {store.identity.get("checkpoint")}'
                        f'); it differs in: ' + '; '.join(differences))
            elif current['embedding_dim'] != store.dim:
                raise IndexMismatchError(f'index {directory} holds {store.dim}-d embeddings, '
                                         f'the model makes {current["embedding_dim"]}-d ones')
            store.identity = current
        print_log(f'loaded index {directory}: {len(store)} items, {store.faiss_index.factory}',
                  logger='current')
        searcher = cls(model, batch_size=batch_size, num_workers=num_workers, store=store)
        searcher._folder = _folder(directory)
        return searcher


def _folder(directory: str) -> Tuple[str, str]:
    """(the index folder, the sha256 of its embeddings file): what a saved graph belongs to."""
    manifest = read_manifest(directory)
    return directory, manifest['sha256'][manifest['files']['embeddings']]


def load_index_model(directory: str, checkpoint: Optional[str] = None, device: str = 'cpu',
                     config: Union[str, Config, None] = None) -> torch.nn.Module:
    """The model that built the index in ``directory``: its saved config, read as data (a
    Python config of an older irtbox is refused, as loading would run it), or ``config``
    (a file you trust), and the checkpoint recorded at build time (or ``checkpoint``)."""
    manifest = read_manifest(directory)
    name = manifest['files'].get('config')
    if config is None and name is None:
        raise QueryError(f'index {directory} was built from embeddings, without a model; '
                         'query it with embeddings')
    if config is None and not name.endswith('.json'):
        raise UntrustedConfigError(
            f'index {directory} keeps its model\'s config as Python ({name}, an older irtbox\'s '
            'index), which loading would run: name the config to use, once you have read it')
    if config is None:  # the rows (read here for the checkpoint's path) are checked on load
        check_files(directory, manifest, ('config',))
        try:
            config = config_from_data(osp.join(directory, name))
        except ConfigError as err:
            raise UntrustedConfigError(str(err)) from None
    identity = read_index_rows(directory, manifest).identity or {}
    if checkpoint is None and identity.get('checkpoint') is not None:
        recorded, root = identity['checkpoint'], manifest['root']
        # A relative path is the build's: relative to its working directory (the root).
        checkpoint = recorded if '://' in recorded or not root else osp.join(root, recorded)
        if '://' not in checkpoint and not osp.isfile(checkpoint):
            raise CheckpointMovedError(directory, checkpoint)
    elif checkpoint is not None and not osp.isfile(checkpoint) and '://' not in checkpoint:
        raise MissingFileError(f'checkpoint {checkpoint} not found', argument='checkpoint')
    return init_model(config, checkpoint, device=device)
