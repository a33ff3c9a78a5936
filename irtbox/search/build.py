"""Build an index of a folder of images (embedded in resumable shards under
``INDEX_DIR/build``, removed once the index is saved) or of the embeddings an extraction wrote."""
import json
import mmap
import os
import os.path as osp
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import numpy as np
from mmengine.config import Config
from tqdm import tqdm

from irtbox.apis import init_model
from irtbox.apis.extract import (FEATURES_FILE, SHARDS_MANIFEST, extract_sharded, list_images,
                                 shard_paths)
from irtbox.apis.identity import COMPARED
from irtbox.evaluation.functional.checks import non_finite_rows
from irtbox.evaluation.neighbours.faiss_index import (FaissIndex, empty_index, has_ivf,
                                                      min_training_vectors, train_index)
from irtbox.evaluation.neighbours.index import (Index, RecallSample, index_folder_lock, normalize,
                                               read_manifest, read_rows, recall_at_k)
from irtbox.structures.embeddings_file import load_embeddings, map_embeddings
from irtbox.utils.dist import resolve_device
from irtbox.utils.errors import ArgumentError, IrtboxError
from irtbox.utils.fileio import atomic_write_text
from irtbox.utils.memory import give_back_freed_heap
from .budget import CHUNK_ROWS, IndexPlan, format_size, plan_index
from .searcher import ImageSearcher

__all__ = ['IndexBuild', 'ShardsKeptError', 'ConfigMovedError', 'FeaturesError', 'build_index',
           'build_index_from_features', 'read_feature_parts', 'BUILD_DIR', 'FAILED_FILE']

BUILD_DIR = 'build'  # the shards of a build in progress, inside the index folder
FAILED_FILE = 'failed.json'


class ConfigMovedError(IrtboxError, FileNotFoundError):
    """The model's config an extraction recorded is no longer where it was; ``argument`` gives
    its new place."""
    argument = 'config'


class SourceMissingError(IrtboxError, FileNotFoundError):
    """No embeddings file or extraction folder where ``source`` says."""
    argument = 'source'


class FeaturesError(IrtboxError, ValueError):
    """Embeddings (``argument``: ``source``) that are not an extraction's one model's rows."""
    argument = 'source'


class ShardsKeptError(IrtboxError, OSError):
    """A build that could not save its index (a full disk): the images it embedded are kept
    in ``work`` for a resumed build (``resume=True``); ``reason`` is what failed."""

    def __init__(self, error: OSError, work: str):
        self.reason, self.work = error.strerror or str(error), work
        super().__init__(error.errno, f'{self.reason}. The embedded images are kept in {work}: '
                         'make room and resume the build (resume=True)')


@dataclass
class IndexBuild:
    """What a build made: the saved ``searcher``, the unreadable images ((path, reason), also
    in ``failed.json``), the held-out recall@10 of an approximate index (None for ``'Flat'``)."""
    searcher: ImageSearcher
    failed: List[Tuple[str, str]] = field(default_factory=list)
    recall_at_10: Optional[float] = None
    seconds: float = 0.0
    report: dict = field(default_factory=dict)  # from features: what the manifest's 'build' says


def _refuse_random_weights(model, config) -> None:
    """Refused before any image is embedded: random weights are another model at every start,
    so no query could use the index."""
    random = [name for name, module in model.named_modules()
              if getattr(module, 'weights_source', None) == 'random initialisation']
    if random:
        raise ArgumentError(
            f'{config}: checkpoint none, and {random[0]} has random weights (the config loads '
            'no pretrained ones): every start builds another model, so no query could use '
            'this index; give the checkpoint of a trained model', 'checkpoint')


def build_index(config, checkpoint: Optional[str], image_dir: str, index_dir: str,
                factory: str = 'Flat', k_factor: int = 4, batch_size: int = 32,
                num_workers: int = 2,
                shard_size: int = 4096, resume: bool = False, device: Optional[str] = None,
                cfg_options: Optional[dict] = None, progress: bool = True) -> IndexBuild:
    """Embed every image under ``image_dir`` and save a searchable index in ``index_dir``.

    Args:
        checkpoint: None: the config's own weights.
        image_dir: searched recursively (:func:`~irtbox.apis.extract.list_images`).
        factory: the faiss factory string: ``'Flat'`` (exact), ``'IVF1024,Flat'``, ...
        k_factor: an approximate index re-ranks ``k_factor`` x k candidates exactly (1: none).
        shard_size: images embedded between two saves of progress (``INDEX_DIR/build``).
        resume: continue an interrupted build from the shards it saved.

    Raises:
        OSError: a file cannot be written (a full disk); no file is left half-written, an
        earlier index in ``index_dir`` stays, and the shards are kept for ``resume``.
        IndexFolderBusy (an OSError): another build or save writes ``index_dir``.
    """
    with index_folder_lock(index_dir):  # before the model: a refusal costs nothing
        return _build_index(config, checkpoint, image_dir, index_dir, factory, k_factor,
                            batch_size, num_workers, shard_size, resume, device, cfg_options,
                            progress)


def _build_index(config, checkpoint, image_dir, index_dir, factory, k_factor, batch_size,
                 num_workers, shard_size, resume, device, cfg_options, progress) -> IndexBuild:
    started = time.time()
    device = resolve_device(device)
    model = init_model(config, checkpoint, device=device, cfg_options=cfg_options)
    paths = list_images(image_dir)
    if checkpoint is None:
        _refuse_random_weights(model, config)
    work = osp.join(index_dir, BUILD_DIR)
    rows, _ = extract_sharded(model, paths, work, shard_size=shard_size, batch_size=batch_size,
                              num_workers=num_workers, resume=resume, progress=progress)
    # The identity the extraction computed: no second pass over the weights.
    searcher = ImageSearcher(model, factory=factory, device=device, identity=rows.identity,
                             k_factor=k_factor if factory != 'Flat' else 1)
    searcher.add(rows.embeddings, rows.ids)
    recall = searcher.recall_vs_exact(k=10) if factory != 'Flat' and len(searcher) else None
    try:
        searcher.save(index_dir)
    except OSError as err:  # a full disk: the embeddings are kept for a resumed build
        raise ShardsKeptError(err, work) from err
    atomic_write_text(osp.join(index_dir, FAILED_FILE),
                      json.dumps([dict(path=p, reason=r) for p, r in rows.failed], indent=1))
    shutil.rmtree(work)
    return IndexBuild(searcher, list(rows.failed), recall, time.time() - started)


# From the embeddings of an extraction.

# A build's own temporaries (named by a random tag): the normalised rows while the index is
# built, the filled index while it is checked; those of a killed build are removed by the next.
_ROWS_TMP = '.rows-from-features.{}.npy.tmp'
_INDEX_TMP = '.index-from-features.{}.faiss.tmp'
_STALE_TMP = re.compile(r'^\.(rows|index)-from-features\.\w+\.(npy|faiss)\.tmp$')
LATENCY_QUERIES = 200  # timed one by one (a Flat index of millions of rows is slow a query)
SATURATED = 0.005  # recall@10 gained by doubling nprobe below which the codes limit it
RERANK = 4  # default k_factor of an approximate index (x k candidates)


def read_feature_parts(source: str) -> list:
    """The embeddings files of ``source`` in row order: ``[source]`` for a file, else the
    shards of an extraction folder (merged or not yet)."""
    if osp.isfile(source):
        return [source]
    manifest = osp.join(source, SHARDS_MANIFEST)
    if not osp.isdir(source) or not osp.isfile(manifest):
        merged = osp.join(source, FEATURES_FILE)
        if osp.isfile(merged):
            return [merged]
        raise SourceMissingError(
            f'{source}: neither an embeddings file (features.npz) nor an extraction folder '
            f'({SHARDS_MANIFEST} and shards/, written by an extraction)')
    return shard_paths(source)


def _rows(array: np.ndarray, start: int, stop: int) -> np.ndarray:
    """A float32 copy of ``array[start:stop]``; a memory map's pages are then given back
    (MADV_DONTNEED) so that a pass over a file bigger than memory does not hold it. Written
    pages are not flushed first: an msync per chunk would make every chunk wait for the disk."""
    block = np.array(array[start:stop], dtype=np.float32)
    mapping = getattr(array, '_mmap', None)
    if mapping is not None and getattr(array, 'mode', 'r') != 'c':  # 'c': changes would go
        mapping.madvise(mmap.MADV_DONTNEED)
    return block


def _repeated_id(ids: list) -> Optional[int]:
    """The position of the first id that an earlier position holds too, else None. Sorted
    64-bit hashes, not a set: a set of millions of ids would add to the build's peak."""
    hashes = np.fromiter(map(hash, ids), np.int64, len(ids))
    order = np.argsort(hashes, kind='stable')
    same = np.flatnonzero(hashes[order[1:]] == hashes[order[:-1]])
    repeats = [order[i + 1] for i in same if ids[order[i + 1]] == ids[order[i]]]
    return int(min(repeats)) if repeats else None


def _read_parts(source: str):
    """(parts, their EmbeddingSets, the model's identity, N, D, the N ids) of ``source``,
    checked to be one model's rows with unique ids."""
    parts = read_feature_parts(source)
    sets = [load_embeddings(p) for p in parts]
    identity = sets[0].identity
    for path, part in zip(parts, sets):
        if part.ids is None:
            raise FeaturesError(f'{path}: embeddings without ids; expected an extraction\'s, '
                                'whose ids are the image paths')
        if part.identity is None:
            raise FeaturesError(f'{path}: no model identity recorded, so queries could not be '
                                'checked against the model that made it; extract the images '
                                'with this irtbox')
        differs = [k for k in COMPARED if part.identity.get(k) != identity.get(k)]
        if differs:
            raise FeaturesError(f'{path}: made by another model than {parts[0]} (differs in '
                                f'{", ".join(differs)}); extract every shard with one model')
    dims = {s.embeddings.shape[1] for s in sets if len(s)}
    n = sum(len(s) for s in sets)
    if not n:
        raise FeaturesError(f'{source}: no embeddings to index')
    if len(dims) > 1:
        raise FeaturesError(f'{source}: embeddings of {sorted(dims)} dimensions; expected one '
                            'model\'s')
    ids = [i for part in sets for i in part.ids]
    repeated = _repeated_id(ids)
    if repeated is not None:
        path = parts[np.searchsorted(np.cumsum([len(part) for part in sets]), repeated, 'right')]
        raise FeaturesError(f'{path}: id {ids[repeated]} is repeated (also in an earlier row); '
                            'expected each image once')
    return parts, sets, identity, n, dims.pop(), ids


def _write_rows(parts: list, sets: list, path: str, n: int, dim: int, progress: bool) -> list:
    """The normalised rows of all parts into one memory-mapped ``.npy`` at ``path``; returns
    the parts' unreadable images."""
    from tqdm import tqdm
    rows = np.lib.format.open_memmap(path, mode='w+', dtype=np.float32, shape=(n, dim))
    failed, at = [], 0
    with tqdm(total=n, desc='reading', unit='vec', disable=not progress) as bar:
        for source, part in zip(parts, sets):
            for start in range(0, len(part), CHUNK_ROWS):
                block = _rows(part.embeddings, start, start + CHUNK_ROWS)
                bad = non_finite_rows(block)
                if len(bad):
                    raise FeaturesError(f'{source}: row {start + bad[0]} (and {len(bad) - 1} '
                                        'more in this chunk) is not finite (NaN or inf)')
                rows[at:at + len(block)] = normalize(block)
                _rows(rows, 0, 0)  # written back, its pages given back
                at += len(block)
                bar.update(len(block))
            failed += list(part.failed)
    rows.flush()
    return failed


def _fill(store: Index, plan, avoid: np.ndarray, rng, spill: str, progress: bool,
          log: Callable[[str], None], stage: Callable[[str], None]) -> None:
    """A faiss index of ``plan`` over ``store.rows``, trained apart from ``avoid`` (the recall
    queries) where there are enough rows. An IVF index is written to ``spill`` and mapped
    back: the slack of its lists (grown by doubling) leaves memory before the check."""
    rows, (n, dim) = store.rows, store.rows.shape
    index = empty_index(plan.factory, dim)
    if not index.is_trained:
        enough = n - len(avoid) >= plan.train_rows
        pool = np.setdiff1d(np.arange(n), avoid) if enough else np.arange(n)
        train = np.sort(rng.choice(pool, size=min(plan.train_rows, len(pool)), replace=False))
        log(f'training {plan.factory} on {len(train)} vectors')
        train_index(index, read_rows(rows, train), plan.factory)
    stage('train')
    with tqdm(total=n, desc='adding', unit='vec', disable=not progress) as bar:
        for start in range(0, n, CHUNK_ROWS):
            index.add(_rows(rows, start, start + CHUNK_ROWS))
            bar.update(min(CHUNK_ROWS, n - start))
    log(f'added {n} vectors')
    stage('add')
    store.faiss_index.place(index)
    if has_ivf(index):
        store.faiss_index.save(spill)
        del index
        store.faiss_index = FaissIndex.load(spill, factory=plan.factory, device='cpu')
        give_back_freed_heap()


def _choose_nprobe(store: Index, sample: RecallSample, target: float,
                   log: Callable[[str], None]) -> Tuple[int, float, list]:
    """nprobe doubled from 16 until the held-out recall@k reaches ``target``, all lists are
    visited, or a doubling gains less than SATURATED (the codes limit the recall: the
    smaller nprobe is kept). Returns (nprobe, its recall, [[nprobe, recall], ...])."""
    import faiss
    ivf, k, curve = faiss.extract_index_ivf(store.faiss_index.index), sample.exact.shape[1], []

    def measure(nprobe):
        ivf.nprobe = store.faiss_index.nprobe = nprobe
        curve.append([nprobe, round(recall_at_k(lambda q, kk: store.search(q, kk)[1], sample),
                                    4)])
        log(f'nprobe {nprobe}: recall@{k} {curve[-1][1]:.3f}')
    measure(min(16, ivf.nlist))
    while curve[-1][1] < target and curve[-1][0] < ivf.nlist:
        measure(min(2 * curve[-1][0], ivf.nlist))
        if curve[-1][1] - curve[-2][1] < SATURATED:
            log(f'recall@{k} saturates at {curve[-2][1]:.3f} (target {target}): the codes '
                'limit it, not nprobe; re-ranking (k_factor), longer codes (a larger budget, '
                'another factory) raise it')
            ivf.nprobe = store.faiss_index.nprobe = curve[-2][0]
            return curve[-2][0], curve[-2][1], curve
    return curve[-1][0], curve[-1][1], curve


def _latency_ms(search: Callable, queries: np.ndarray) -> Tuple[float, float]:
    """p50 and p99 of one query per call on one thread (as a web request searches)."""
    import faiss
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        for q in queries[:10]:  # warm-up
            search(q[None])
        times = []
        for q in queries:
            started = time.perf_counter()
            search(q[None])
            times.append(time.perf_counter() - started)
    finally:
        faiss.omp_set_num_threads(threads)
    return 1000 * float(np.percentile(times, 50)), 1000 * float(np.percentile(times, 99))


def _plan(n: int, dim: int, factory: Optional[str], max_index_memory: Optional[int],
          max_build_memory: Optional[int]):
    """The IndexPlan of ``factory`` when given, else the one that fits the budgets."""
    if factory:
        # 39 training points per IVF list or PQ centroid, as faiss asks, and at least a chunk.
        return IndexPlan(factory, 0,
                         min(n, max(CHUNK_ROWS, 39 * min_training_vectors(factory))), 0)
    return plan_index(n, dim, max_index_memory, max_build_memory)


def build_index_from_features(source: str, index_dir: str, factory: Optional[str] = None,
                              max_index_memory: Optional[int] = None,
                              max_build_memory: Optional[int] = None,
                              config: Optional[str] = None, target_recall: float = 0.9,
                              k_factor: int = RERANK, num_queries: int = 1000, seed: int = 0,
                              progress: bool = True,
                              log: Callable[[str], None] = print) -> IndexBuild:
    """Index the embeddings an extraction wrote, without decoding an image.

    Args:
        source: an embeddings file with ids and the model's identity, or an extraction folder
            whose shards are all written.
        index_dir: created; an index there is replaced.
        factory: None: the index :func:`~irtbox.search.budget.plan_index` chooses for
            ``max_index_memory`` (bytes; None: the exact ``Flat``) and ``max_build_memory``.
        config: saved with the index; default the one the extraction recorded.
        target_recall: for an IVF index's nprobe (:func:`_choose_nprobe`).
        k_factor: an approximate index re-ranks ``k_factor`` x k candidates exactly against
            the memory-mapped rows (1: none; ``Flat`` never).
        num_queries: held-out queries for recall@10 (the first LATENCY_QUERIES timed).

    Returns:
        IndexBuild whose ``report`` is also the manifest's ``build`` entry.

    Raises:
        IndexBudgetError (a ValueError): no index fits the budget (naming one that does).
        IndexFolderBusy (an OSError): another build or save writes ``index_dir``.
    """
    with index_folder_lock(index_dir):
        return _build_index_from_features(source, index_dir, factory, max_index_memory,
                                          max_build_memory, config, target_recall, k_factor,
                                          num_queries, seed, progress, log)


def _build_index_from_features(source, index_dir, factory, max_index_memory, max_build_memory,
                               config, target_recall, k_factor, num_queries, seed, progress,
                               log) -> IndexBuild:
    started = time.time()
    parts, sets, identity, n, dim, ids = _read_parts(source)
    plan = _plan(n, dim, factory, max_index_memory, max_build_memory)
    log(f'{n} x {dim} embeddings from {len(parts)} file(s); index {plan.factory}'
        + (f' (~{format_size(plan.index_bytes)} in memory, build ~'
           f'{format_size(plan.build_bytes)}; budget {format_size(max_index_memory)})'
           if max_index_memory and not factory else ''))
    config = config or identity.get('config')
    if config is None or not osp.isfile(config):
        raise ConfigMovedError(f'the model\'s config {config} (recorded by the extraction) is '
                               'not there; pass its location')
    cfg = Config.fromfile(config)
    for name in os.listdir(index_dir):  # a killed build's (the folder is this build's now)
        if _STALE_TMP.match(name):
            os.remove(osp.join(index_dir, name))
    tag = uuid.uuid4().hex[:12]
    tmp = osp.join(index_dir, _ROWS_TMP.format(tag))
    index_tmp = osp.join(index_dir, _INDEX_TMP.format(tag))
    # The seconds of each step, in the report: where a build's time goes.
    stages, mark = {}, [started]

    def stage(name):
        stages[name] = round(time.time() - mark[0], 1)
        mark[0] = time.time()
    try:
        failed = _write_rows(parts, sets, tmp, n, dim, progress)
        del sets
        give_back_freed_heap()  # the ids' lists of every part, before the index grows
        stage('read')
        rows = np.load(tmp, mmap_mode='r')
        rng = np.random.default_rng(seed)
        # The exact answers before the index exists: their transient blocks do not add to
        # the index at its full size (the build's peak).
        sample = RecallSample.draw(rows, 10, num_queries, rng,
                                   read=lambda start, stop: _rows(rows, start, stop))
        log(f'exact top {sample.exact.shape[1]} of {len(sample.positions)} queries '
            f'({time.time() - started:.0f} s)')
        stage('exact')
        store = Index(plan.factory, device='cpu', identity=identity,
                      k_factor=k_factor if plan.factory != 'Flat' else 1)
        store.rows, store.ids = rows, ids
        _fill(store, plan, sample.positions, rng, index_tmp, progress, log, stage)
        nprobe, curve = None, []
        if has_ivf(store.faiss_index.index):
            nprobe, recall, curve = _choose_nprobe(store, sample, target_recall, log)
        else:
            recall = store.recall_at_k(sample=sample)
        p50, p99 = _latency_ms(lambda q: store.search(q, min(10, n)),
                               sample.vectors[:LATENCY_QUERIES])
        log(f'recall@10 {recall:.3f}' + (f' at nprobe {nprobe}' if nprobe else '')
            + (f', re-ranking {store.k_factor} x 10' if store.k_factor > 1 else '')
            + f', one query p50 {p50:.2f} ms, p99 {p99:.2f} ms ({time.time() - started:.0f} s)')
        stage('check')
        store.build_info = dict(
            source=osp.abspath(source), rows=n, dim=dim, factory=plan.factory, nprobe=nprobe,
            k_factor=store.k_factor, max_index_memory=max_index_memory,
            max_build_memory=max_build_memory, train_rows=plan.train_rows,
            recall_at_10=round(recall, 4), recall_queries=len(sample.positions),
            recall_by_nprobe=curve, query_p50_ms=round(p50, 3), query_p99_ms=round(p99, 3),
            build_seconds=round(time.time() - started, 1), stage_seconds=stages)
        searcher = ImageSearcher(store=store)
        searcher.config = cfg
        searcher.save(index_dir)
        # The saved files, not the temporary ones (removed below), are what it searches.
        saved = read_manifest(index_dir)['files']
        store.rows = map_embeddings(osp.join(index_dir, saved['embeddings']))
        if has_ivf(store.faiss_index.index):
            store.faiss_index = FaissIndex.load(osp.join(index_dir, saved['index']),
                                                factory=plan.factory, nprobe=nprobe,
                                                device='cpu')
    finally:
        for path in (tmp, index_tmp):
            if osp.exists(path):
                os.remove(path)
    atomic_write_text(osp.join(index_dir, FAILED_FILE),
                      json.dumps([dict(path=p, reason=r) for p, r in failed], indent=1))
    return IndexBuild(searcher, failed, recall, time.time() - started, store.build_info)
