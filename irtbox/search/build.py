"""Build an index of a folder of images: what ``tools/search.py build`` runs.

The images are embedded in resumable shards under ``INDEX_DIR/build``
(:func:`irtbox.apis.extract.extract_sharded`), merged, indexed with faiss, checked against
exact search when the index is approximate, and saved (:meth:`ImageSearcher.save`) with the
list of unreadable images (``failed.json``); the shards are removed once the index is saved.
"""
import json
import os.path as osp
import shutil
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from irtbox.utils.fileio import atomic_write_text
from .searcher import ImageSearcher

__all__ = ['IndexBuild', 'build_index', 'BUILD_DIR', 'FAILED_FILE']

BUILD_DIR = 'build'  # the shards of a build in progress, inside the index folder
FAILED_FILE = 'failed.json'


@dataclass
class IndexBuild:
    """What :func:`build_index` made: the ``searcher`` (saved in the index folder), the
    images that could not be read ((path, reason), also in ``failed.json``), the recall@10
    of an approximate index against exact search (None for ``'Flat'``) and the seconds it
    took."""
    searcher: ImageSearcher
    failed: List[Tuple[str, str]] = field(default_factory=list)
    recall_at_10: Optional[float] = None
    seconds: float = 0.0


def _refuse_random_weights(model, config) -> None:
    """Without a checkpoint, a backbone of random weights (no pretrained weights in the
    config) is another model at every start: no query could use the index. Refused before
    any image is embedded."""
    random = [name for name, module in model.named_modules()
              if getattr(module, 'weights_source', None) == 'random initialisation']
    if random:
        raise ValueError(
            f'{config}: checkpoint none, and {random[0]} has random weights (the config loads '
            'no pretrained ones): every start builds another model, so no query could use '
            'this index; give the checkpoint of a trained model')


def build_index(config, checkpoint: Optional[str], image_dir: str, index_dir: str,
                factory: str = 'Flat', batch_size: int = 32, num_workers: int = 2,
                shard_size: int = 4096, resume: bool = False, device: Optional[str] = None,
                cfg_options: Optional[dict] = None, progress: bool = True) -> IndexBuild:
    """Embed every image under ``image_dir`` and save a searchable index in ``index_dir``.

    Args:
        config, checkpoint: the model (``init_model``); ``checkpoint`` None:
            the config's own weights.
        image_dir: the images (searched recursively,
            :func:`~irtbox.apis.extract.list_images`).
        index_dir: the index folder (created).
        factory: the faiss factory string: ``'Flat'`` (exact), ``'IVF1024,Flat'``, ...
        batch_size, num_workers: images per forward pass; decoding processes.
        shard_size: images embedded between two saves of progress (``INDEX_DIR/build``).
        resume: continue an interrupted build from the shards it saved.
        device: ``'cpu'`` or ``'cuda'`` (default: CUDA when available), for the model and
            the index.
        cfg_options: config overrides.
        progress: a progress bar.

    Raises:
        FileNotFoundError, FileExistsError, ValueError: the images, the shards of an earlier
        build (``resume`` needed, or another job) or the model are not what is needed.
        OSError: a file cannot be written (a full disk), named in the message; no file is
        left half-written (a shard, an index file), an earlier index in ``index_dir`` stays
        as it was, and the shards written so far are kept for ``resume``.
    """
    import torch

    from irtbox.apis import init_model
    from irtbox.apis.extract import extract_sharded, list_images
    started = time.time()
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    model = init_model(config, checkpoint, device=device, cfg_options=cfg_options)
    paths = list_images(image_dir)
    if checkpoint is None:
        _refuse_random_weights(model, config)
    work = osp.join(index_dir, BUILD_DIR)
    rows, _ = extract_sharded(model, paths, work, shard_size=shard_size, batch_size=batch_size,
                              num_workers=num_workers, resume=resume, progress=progress)
    # The identity the extraction computed: no second pass over the weights.
    searcher = ImageSearcher(model, factory=factory, device=device, identity=rows.identity)
    searcher.add(rows.embeddings, rows.ids)
    recall = searcher.recall_vs_exact(k=10) if factory != 'Flat' and len(searcher) else None
    try:
        searcher.save(index_dir)
    except OSError as err:  # a full disk: the embeddings are kept for --resume
        raise type(err)(err.errno, f'{err.strerror or err}. The embedded images are kept in '
                        f'{work}: make room and run the same command with --resume') from err
    atomic_write_text(osp.join(index_dir, FAILED_FILE),
                      json.dumps([dict(path=p, reason=r) for p, r in rows.failed], indent=1))
    shutil.rmtree(work)
    return IndexBuild(searcher, list(rows.failed), recall, time.time() - started)
