"""Embeddings of your own images: a folder, a list of files or arrays, through the config's test
pipeline; for big collections in resumable shards, on one process or several
(:func:`extract_folder`, what ``irtbox extract`` runs).

Every result is an :class:`~irtbox.structures.embeddings_file.EmbeddingSet` (embeddings, ids,
failed images, the model's identity) and every file written (the shards, ``features.npz``) is
an embeddings file (:func:`~irtbox.structures.embeddings_file.save_embeddings`).

Unreadable files are skipped, counted and listed (in the result, a warning and
``features.npz``): never a crash an hour in, never a silent drop. Non-finite embeddings are an
error (:class:`NonFiniteEmbeddingsError`), never a useless features file.
"""
import hashlib
import json
import logging
import os
import os.path as osp
import time
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.logging import print_log

from irtbox.models.input_spec import input_spec_of
from irtbox.structures.embeddings_file import EmbeddingSet, load_embeddings, save_embeddings
from irtbox.utils.config import load_config
from irtbox.utils.dist import init_distributed
from irtbox.utils.errors import ArgumentError, IrtboxError, with_prefix
from irtbox.utils.fileio import atomic_write_text

from .identity import COMPARED, model_identity
from .inference import init_model
from .model_zoo import resolve_config
from .run_setup import dist_cfg_of

__all__ = ['NonFiniteEmbeddingsError', 'EarlierShardsError', 'MissingShardsError', 'list_images',
           'extract_features', 'prepare_shards', 'merge_shards', 'extract_sharded',
           'extract_folder', 'FEATURES_FILE']

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff', '.gif')
SHARDS_MANIFEST = 'shards.json'
FEATURES_FILE = 'features.npz'
# Failed images named in the warning (all of them are in the result).
SHOWN_FAILURES = 5


class NonFiniteEmbeddingsError(IrtboxError, ValueError):
    """The model gave NaN or inf embeddings for some images (a NaN in its weights, or inputs
    that overflow): they would make a features file or an index useless."""


class EarlierShardsError(IrtboxError, FileExistsError):
    """The output folder holds the shards of an earlier extraction, and ``resume`` was not
    given."""


class MissingShardsError(IrtboxError, FileNotFoundError):
    """Shards of an unfinished extraction are missing."""


def list_images(folder: str, recursive: bool = True) -> List[str]:
    """The image files under ``folder`` (extensions ``IMAGE_EXTENSIONS``, any case), sorted."""
    if not osp.isdir(folder):
        raise FileNotFoundError(f'image folder not found: {folder}')
    found = []
    for root, dirs, files in os.walk(folder):
        found += [osp.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
        if not recursive:
            break
    if not found:
        raise ValueError(f'no images ({", ".join(IMAGE_EXTENSIONS)}) under {folder}'
                         + ('' if recursive else ' (sub-folders not searched)'))
    return sorted(found)


def _as_items(images) -> List:
    """A list of paths and/or RGB arrays; arrays are checked here, as they are not files that
    may be unreadable but the caller's data."""
    if isinstance(images, str):
        return list_images(images) if osp.isdir(images) else [images]
    if isinstance(images, np.ndarray) and images.ndim == 3:
        images = [images]
    items = list(images)
    for i, item in enumerate(items):
        if not isinstance(item, str) and not (isinstance(item, np.ndarray) and item.ndim == 3
                                              and item.shape[2] == 3
                                              and item.dtype == np.uint8):
            raise ValueError(f'images[{i}]: expected a path or an H x W x 3 uint8 RGB array, '
                             f'got {type(item).__name__} {getattr(item, "dtype", "")} '
                             f'{getattr(item, "shape", "")}')
    return items


class _ImageDataset(torch.utils.data.Dataset):
    """Paths or H x W x 3 RGB uint8 arrays through the model's test pipeline (its
    :class:`~irtbox.models.input_spec.InputSpec`); a failure is an item ``{'id', 'error'}``
    instead of an exception, so that one bad file does not end the run.

    ``CropBBox`` in a (landmark) pipeline is a no-op here: plain images carry no box.
    """

    def __init__(self, items: Sequence, spec):
        self.items, self.spec = items, spec
        self.pipeline = spec.transforms()
        # Arrays are decoded already: the same pipeline without its file loader.
        has_arrays = not all(isinstance(item, str) for item in items)
        self.array_pipeline = spec.transforms(arrays=True) if has_arrays else None

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        item = self.items[index]
        name = item if isinstance(item, str) else f'array:{index}'
        try:
            if isinstance(item, str):
                results = self.pipeline(dict(img_path=item, sample_idx=index))
            else:
                results = self.array_pipeline(self.spec.as_loaded(item, index))
            if results is None:
                raise ValueError('the test pipeline dropped it')
        except Exception as err:  # any decoding / transform failure: report it, go on
            return dict(id=name, error=f'{type(err).__name__}: {err}'.strip())
        # The data samples (labels, metainfo) play no part in the embedding.
        return dict(id=name, inputs=results['inputs'])


def _collate(batch: Sequence[dict]) -> dict:
    """DataLoader collate: ``ids`` and ``inputs`` of the images read, ``failed`` (id, reason)
    of the others, ``size`` = len(batch). Same-size inputs are stacked into one B x 3 x H x W
    uint8 tensor (one transfer from a worker instead of B, one batched normalisation); else
    they stay a list (see :func:`_embed_batch`)."""
    good = [b for b in batch if 'error' not in b]
    inputs = [b['inputs'] for b in good]
    if inputs and all(x.shape == inputs[0].shape for x in inputs):
        inputs = torch.stack(inputs)
    return dict(ids=[b['id'] for b in good], inputs=inputs, size=len(batch),
                failed=[(b['id'], b['error']) for b in batch if 'error' in b])


def _embed_batch(model, inputs: Union[torch.Tensor, List[torch.Tensor]]) -> torch.Tensor:
    """B x D embeddings of a batch: stacked inputs in one forward; a list (sizes differ: a
    keep-ratio, short-edge or scale-factor pipeline) one forward per size, as the
    preprocessor would pad the smaller images of a mixed batch and change their embeddings."""
    def forward(batch):
        return model(model.data_preprocessor(dict(inputs=batch), False)['inputs'], mode='tensor')
    if isinstance(inputs, torch.Tensor):
        return forward(inputs)
    embeddings = [None] * len(inputs)
    for shape in {tuple(x.shape) for x in inputs}:
        same = [i for i, x in enumerate(inputs) if tuple(x.shape) == shape]
        for i, embedding in zip(same, forward(torch.stack([inputs[i] for i in same]))):
            embeddings[i] = embedding
    return torch.stack(embeddings)


def _embed_items(model, items: Sequence, batch_size: int, num_workers: int, progress: bool,
                 desc: str = 'embedding'):
    """(N x D float32 embeddings, ids, failed) of ``items`` (paths or RGB arrays), in order."""
    from tqdm import tqdm
    spec = input_spec_of(model, 'extract_features')
    if batch_size < 1:
        raise ValueError(f'extract_features: batch_size must be positive, got {batch_size}')
    dataset = _ImageDataset(items, spec)
    # Page-locked batches when the model is on a GPU: their copies to it are asynchronous.
    on_gpu = any(p.is_cuda for p in model.parameters())
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                                         collate_fn=_collate, shuffle=False, pin_memory=on_gpu)
    embeddings, ids, failed, non_finite = [], [], [], []
    model.eval()
    with torch.inference_mode(), tqdm(total=len(items), desc=desc, unit='img',
                                      disable=not progress) as bar:
        for batch in loader:
            failed += batch['failed']
            if batch['ids']:
                block = _embed_batch(model, batch['inputs']).float().cpu().numpy()
                bad = ~np.isfinite(block).all(axis=1)
                non_finite += [i for i, b in zip(batch['ids'], bad) if b]
                embeddings.append(block)
                ids += batch['ids']
            bar.update(batch['size'])
    if non_finite:
        raise NonFiniteEmbeddingsError(_non_finite_message(model, non_finite, len(ids), desc))
    if not embeddings:
        return np.zeros((0, 0), np.float32), ids, failed
    return np.concatenate(embeddings).astype(np.float32, copy=False), ids, failed


def _first_few(items: Sequence[str], sep: str = ', ') -> str:
    more = len(items) - SHOWN_FAILURES
    return sep.join(items[:SHOWN_FAILURES]) + (f' and {more} more' if more > 0 else '')


def _non_finite_message(model, bad: Sequence[str], total: int, desc: str) -> str:
    weights = [name for name, p in model.state_dict().items()
               if p.is_floating_point() and not torch.isfinite(p).all()]
    cause = (f'the model\'s weights hold NaN or inf ({", ".join(weights[:3])}'
             f'{" ..." if len(weights) > 3 else ""}): check the checkpoint' if weights else
             'check the checkpoint and the test pipeline (inputs that overflow?)')
    return (f'{desc}: {len(bad)} of {total} images gave non-finite (NaN or inf) embeddings '
            f'({_first_few(bad)}); {cause}. Nothing is saved.')


def _warn_failed(failed: Sequence[Tuple[str, str]], total: int) -> None:
    if failed:
        shown = _first_few([f'{path} ({reason})' for path, reason in failed], '; ')
        print_log(f'{len(failed)} of {total} images could not be read and were skipped: '
                  f'{shown}', logger='current', level=logging.WARNING)


def extract_features(model, images: Union[str, Sequence], batch_size: int = 32,
                     num_workers: int = 0, progress: bool = True,
                     device: Optional[Union[str, torch.device]] = None,
                     identity: bool = True) -> EmbeddingSet:
    """Embeddings of ``images``, preprocessed by the config's test pipeline exactly as
    testing does (and with the model's multi-scale test and whitening, if any).

    Args:
        model: a retriever from ``init_model`` / ``get_model`` (it carries ``model.cfg``);
            put in eval mode.
        images: a folder (see :func:`list_images`), an image path, a list of paths, or
            H x W x 3 uint8 arrays in RGB order (as PIL gives them; files are decoded to BGR
            by the pipeline and arrays are flipped to match).
        batch_size: images per forward pass.
        num_workers: image-decoding processes (0: in this process).
        progress: a progress bar over images.
        device: where to run (e.g. ``'cuda'``); the model is moved there. None: where the
            model is.
        identity: record the model's identity (``irtbox.apis.model_identity``: a hash of its
            weights and one more forward) in the result; False leaves it None.

    Returns:
        EmbeddingSet: N x D float32 L2-normalised ``embeddings`` and the ``ids`` of the images
        read (their paths, or ``array:<i>`` for the i-th input array); unreadable files are
        in ``failed`` (id, reason) and a warning, not in the embeddings; ``identity``.

    Raises:
        NonFiniteEmbeddingsError: (a ValueError) some images gave NaN or inf embeddings; the
            message counts them and names the first few.
    """
    items = _as_items(images)
    if device is not None:
        model.to(device)
    embeddings, ids, failed = _embed_items(model, items, batch_size, num_workers, progress)
    _warn_failed(failed, len(items))
    return EmbeddingSet(embeddings, ids=ids, failed=failed,
                        identity=model_identity(model) if identity else None)


# Shards: big collections, resumable, several processes.

def _shard_path(out_dir: str, index: int) -> str:
    return osp.join(out_dir, 'shards', f'shard_{index:06d}.npz')


def _job_manifest(model, paths: Sequence[str], shard_size: int,
                  identity: Optional[dict] = None) -> dict:
    """What a resumed extraction must share with the first one: images, sharding, and the
    model's weights and preprocessing (else two models' embeddings would be merged)."""
    identity = identity or model_identity(model)
    return dict(images=len(paths),
                images_sha256=hashlib.sha256('\n'.join(paths).encode()).hexdigest(),
                shard_size=shard_size, shards=-(-len(paths) // shard_size),
                model={k: identity[k] for k in COMPARED})


def _differences(found: dict, wanted: dict, changed: Sequence[str]) -> str:
    out = []
    for key in changed:
        if key == 'model':  # digests: name the fields rather than print them
            earlier = found.get('model') or {}
            out.append('model: ' + ', '.join(k for k in wanted['model']
                                             if earlier.get(k) != wanted['model'][k]))
        else:
            out.append(f'{key}: {found.get(key)} then, {wanted[key]} now')
    return '; '.join(out)


def prepare_shards(model, out_dir: str, paths: Sequence[str], shard_size: int, resume: bool,
                   write: bool = True, identity: Optional[dict] = None) -> None:
    """Write the manifest ``out_dir/shards.json`` of an extraction (``write``), or check that
    the one there describes the same job (image list, shard size, model) and that ``resume``
    allows continuing it. ``identity``: the model's, when already computed (else it is).
    Raises FileExistsError / ValueError naming what differs."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    wanted = _job_manifest(model, paths, shard_size, identity)
    if osp.isfile(path):
        if not resume:
            raise EarlierShardsError(f'{out_dir} holds shards of an earlier extraction; choose '
                                     'another output folder', remedy=dict(resume=True))
        with open(path) as f:
            found = json.load(f)
        changed = [k for k in wanted if found.get(k) != wanted[k]]
        if changed:
            raise ValueError(f'cannot resume in {out_dir}: the earlier extraction had other '
                             f'{", ".join(changed)} ({_differences(found, wanted, changed)}); '
                             'use a new output folder')
    elif not write:
        raise FileNotFoundError(f'{path} is missing: rank 0 prepares the shards first')
    else:
        os.makedirs(osp.join(out_dir, 'shards'), exist_ok=True)
        atomic_write_text(path, json.dumps(wanted, indent=1))


def merge_shards(out_dir: str, identity: Optional[dict] = None) -> EmbeddingSet:
    """The shards of ``out_dir`` in order, as one set (and a warning listing the unreadable
    images); a missing shard is an error naming it. ``identity``: the model's (default: the
    one the first shard records)."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} not found: {out_dir} holds no sharded extraction')
    with open(path) as f:
        manifest = json.load(f)
    missing = [_shard_path(out_dir, i) for i in range(manifest['shards'])
               if not osp.isfile(_shard_path(out_dir, i))]
    if missing:
        raise MissingShardsError(
            f'{len(missing)} of {manifest["shards"]} shards are missing '
            f'({", ".join(missing[:3])}{" ..." if len(missing) > 3 else ""}): the extraction '
            'is not finished; run it again', remedy=dict(resume=True))
    embeddings, ids, failed = [], [], []
    for index in range(manifest['shards']):
        shard = load_embeddings(_shard_path(out_dir, index))
        if shard.ids is None:
            raise ValueError(f'{_shard_path(out_dir, index)}: a shard without ids; expected one '
                             'written by extract_sharded (delete it and resume the '
                             'extraction)')
        if len(shard.ids):
            embeddings.append(np.asarray(shard.embeddings))
        ids += list(shard.ids)
        failed += shard.failed
        identity = identity or shard.identity
    dims = sorted({e.shape[1] for e in embeddings})
    if len(dims) > 1:
        raise ValueError(f'the shards of {out_dir} hold embeddings of {dims} dimensions; '
                         'expected one model\'s: delete them and extract again')
    _warn_failed(failed, manifest['images'])
    return EmbeddingSet(np.concatenate(embeddings) if embeddings else np.zeros((0, 0), np.float32),
                        ids=ids, failed=failed, identity=identity)


def extract_sharded(model, paths: Sequence[str], out_dir: str, shard_size: int = 4096,
                    batch_size: int = 32, num_workers: int = 0, resume: bool = False,
                    progress: bool = True, identity: Optional[dict] = None
                    ) -> Tuple[Optional[EmbeddingSet], List[int]]:
    """Embed ``paths`` into ``out_dir`` in shards of ``shard_size`` images, on one process or
    on every rank of a started ``torch.distributed`` group: rank 0 writes (or, with
    ``resume``, checks) the manifest (:func:`prepare_shards`); rank ``r`` embeds the missing
    shards ``i % world_size == r``, each written atomically to
    ``out_dir/shards/shard_<i:06d>.npz`` when done; rank 0 merges them (:func:`merge_shards`).
    ``identity``: the model's, when already computed.

    Returns:
        (the merged set on rank 0, None on the others; the shards this rank computed).
        Errors on a distributed job are prefixed by the rank.
    """
    import torch.distributed as dist
    distributed = dist.is_available() and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    paths = list(paths)
    try:
        if shard_size < 1:
            raise ArgumentError(f'shard_size must be positive, got {shard_size}', 'shard_size')
        identity = identity or model_identity(model)
        if rank == 0:  # the manifest is written (or checked) before the others look at it
            prepare_shards(model, out_dir, paths, shard_size, resume, identity=identity)
        if world > 1:
            dist.barrier()
            if rank > 0:  # every rank's job (its image list, its model) is rank 0's
                prepare_shards(model, out_dir, paths, shard_size, True, write=False,
                               identity=identity)
        count = -(-len(paths) // shard_size)
        computed = []
        for index in range(rank, count, world):
            target = _shard_path(out_dir, index)
            if osp.isfile(target):
                continue
            chunk = paths[index * shard_size:(index + 1) * shard_size]
            embeddings, ids, failed = _embed_items(model, chunk, batch_size, num_workers,
                                                   progress and rank == 0,
                                                   desc=f'shard {index + 1}/{count}')
            save_embeddings(target, EmbeddingSet(embeddings, ids=ids, failed=failed,
                                                 identity=identity))
            computed.append(index)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        if world == 1:
            raise
        raise with_prefix(err, f'rank {rank}') from err
    if world > 1:
        dist.barrier()
    return (merge_shards(out_dir, identity) if rank == 0 else None), computed


def extract_folder(config, checkpoint: Optional[str], image_dir: str, out_dir: str,
                   batch_size: int = 32, num_workers: int = 2, shard_size: int = 4096,
                   resume: bool = False, launcher: str = 'none', cfg_options: Optional[dict] = None,
                   device: Optional[str] = None, progress: bool = True) -> Optional[EmbeddingSet]:
    """Embed every image under ``image_dir`` into ``out_dir/features.npz`` (an embeddings
    file: embeddings, ids = the image paths, failed images, the model's identity), in
    resumable shards (``out_dir/shards``), on this process or on every rank of a distributed
    job (:func:`extract_sharded`).

    Args:
        config, checkpoint: the model (``init_model``); ``checkpoint`` None:
            the config's own weights.
        image_dir: the images (:func:`list_images`).
        out_dir: where the shards and ``features.npz`` go.
        batch_size, num_workers: images per forward pass; decoding processes per rank.
        shard_size: images per shard (progress is saved after each).
        resume: keep the shards an interrupted run of the same job wrote.
        launcher: ``'none'`` (this process), ``'pytorch'`` (torchrun) or ``'slurm'``.
        cfg_options: config overrides.
        device: where to run; default the rank's GPU when CUDA is available, else the CPU.
        progress: a progress bar (on rank 0).

    Returns:
        EmbeddingSet: what ``features.npz`` holds, on rank 0; None on the other ranks.

    Raises:
        FileNotFoundError, FileExistsError, ValueError: the images, the shards or the model
        are not what is needed; NonFiniteEmbeddingsError (a ValueError): the model gave NaN
        or inf embeddings, and no ``features.npz`` is written.
    """
    import torch.distributed as dist

    from mmengine.config import Config
    started = time.time()
    if not isinstance(config, Config):
        config = load_config(resolve_config(config), cfg_options)
    if launcher != 'none':  # the config's dist_cfg: its timeout covers rank 0's merge
        init_distributed(launcher, **dist_cfg_of(config))
    world = dist.get_world_size() if launcher != 'none' else 1
    if device is None:
        device = f'cuda:{torch.cuda.current_device()}' if torch.cuda.is_available() else 'cpu'
    model = init_model(config, checkpoint, device=device, cfg_options=cfg_options)
    paths = list_images(image_dir)
    result, computed = extract_sharded(model, paths, out_dir, shard_size, batch_size, num_workers,
                                       resume, progress)
    if result is None:
        return None
    out = osp.join(out_dir, FEATURES_FILE)
    save_embeddings(out, result)
    print_log(f'{len(result)} of {len(paths)} images embedded ({result.embeddings.shape[1]}-d), '
              f'{len(result.failed)} unreadable; {world} process(es), rank 0 computed '
              f'{len(computed)} shard(s) of {shard_size}; {time.time() - started:.1f} s: {out}',
              logger='current')
    return result
