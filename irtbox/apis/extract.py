"""Embeddings of your own images (a folder, files or arrays) through the config's test pipeline; for
big collections in resumable shards, on one process or several. Unreadable files are skipped,
counted and listed, never a crash an hour in nor a silent drop; non-finite embeddings are an error,
never a useless features file."""
import contextlib
import hashlib
import json
import logging
import os
import os.path as osp
import re
import time
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.logging import print_log
from tqdm import tqdm

from irtbox.models.input_spec import input_spec_of
from irtbox.structures.embeddings_file import EmbeddingSet, load_embeddings, save_embeddings
from irtbox.utils.config import load_config
from irtbox.utils.dist import fail_together, init_distributed
from irtbox.utils.errors import ArgumentError, IrtboxError, with_prefix
from irtbox.utils.fileio import atomic_write_text, read_json

from .identity import COMPARED, model_identity
from .inference import init_model
from .model_zoo import resolve_config
from .run_setup import dist_cfg_of

__all__ = ['NonFiniteEmbeddingsError', 'EarlierShardsError', 'MissingShardsError',
           'ShardsManifestError', 'list_images', 'extract_features', 'prepare_shards',
           'read_shards_manifest', 'shard_paths', 'merge_shards', 'extract_sharded',
           'extract_folder', 'FEATURES_FILE']

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff', '.gif')
SHARDS_MANIFEST = 'shards.json'
FEATURES_FILE = 'features.npz'
# Failed images named in the warning (all of them are in the result).
SHOWN_FAILURES = 5


class NonFiniteEmbeddingsError(IrtboxError, ValueError):
    """The model gave NaN or inf embeddings for some images."""


class EarlierShardsError(IrtboxError, FileExistsError):
    """The output folder holds an earlier extraction's shards and ``resume`` was not given."""


class MissingShardsError(IrtboxError, FileNotFoundError):
    """Shards of an unfinished extraction are missing."""


class ShardsManifestError(IrtboxError, ValueError):
    """An extraction's ``shards.json`` that is not one it wrote, or shards it does not list."""


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
    """A list of paths and/or RGB arrays; arrays are checked here: they are the caller's data,
    not files that may be unreadable."""
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
    """Paths or H x W x 3 RGB uint8 arrays through the model's test pipeline; a failure is an
    item ``{'id', 'error'}``, so that one bad file does not end the run. A pipeline's
    ``CropBBox`` is a no-op here: plain images carry no box."""

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
    """``ids``, ``inputs``, ``failed`` (id, reason), ``size``. Same-size inputs are stacked into
    one B x 3 x H x W uint8 tensor (one transfer from a worker instead of B); else a list."""
    good = [b for b in batch if 'error' not in b]
    inputs = [b['inputs'] for b in good]
    if inputs and all(x.shape == inputs[0].shape for x in inputs):
        inputs = torch.stack(inputs)
    return dict(ids=[b['id'] for b in good], inputs=inputs, size=len(batch),
                failed=[(b['id'], b['error']) for b in batch if 'error' in b])


def _embed_batch(model, inputs: Union[torch.Tensor, List[torch.Tensor]]) -> torch.Tensor:
    """B x D embeddings; a list of inputs of different sizes gets one forward per size, as the
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
        model: from ``init_model`` / ``get_model``; put in eval mode.
        images: a folder, an image path, a list of paths, or H x W x 3 uint8 RGB arrays (as
            PIL gives them; files are decoded to BGR and arrays are flipped to match).
        device: the model is moved there; None: where the model is.
        identity: record the model's identity (a hash of its weights and one more forward).

    Returns:
        EmbeddingSet: N x D float32 L2-normalised ``embeddings``, ``ids`` (paths, or
        ``array:<i>``), unreadable files in ``failed`` (id, reason), ``identity``.
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
    """Write the manifest ``out_dir/shards.json`` (``write``), or check that the one there is
    the same job (image list, shard size, model) and that ``resume`` allows continuing it."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    wanted = _job_manifest(model, paths, shard_size, identity)
    if osp.isfile(path):
        if not resume:
            raise EarlierShardsError(f'{out_dir} holds shards of an earlier extraction; choose '
                                     'another output folder', remedy=dict(resume=True))
        found = read_shards_manifest(out_dir)
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


def read_shards_manifest(out_dir: str) -> dict:
    """``out_dir/shards.json``, checked to be an extraction's: an object whose ``shards`` is a
    whole number >= 0."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    try:
        manifest = read_json(path)
    except ValueError as err:
        raise ShardsManifestError(f'{path}: not valid JSON ({err}); expected the manifest an '
                                  'extraction writes: extract again into a new folder') from None
    shards = manifest.get('shards') if isinstance(manifest, dict) else None
    if type(shards) is not int or shards < 0:
        raise ShardsManifestError(f'{path}: "shards" is {shards!r}; expected a whole number >= 0 '
                                  '(the manifest an extraction writes): extract again into a '
                                  'new folder')
    return manifest


def shard_paths(out_dir: str, manifest: Optional[dict] = None) -> List[str]:
    """The shard files of the extraction in ``out_dir`` in order (``manifest``: its
    ``shards.json``, read when not given); a missing one is a :class:`MissingShardsError`."""
    manifest = manifest or read_shards_manifest(out_dir)
    paths = [_shard_path(out_dir, i) for i in range(manifest['shards'])]
    folder = osp.join(out_dir, 'shards')
    unlisted = sorted(name for name in (os.listdir(folder) if osp.isdir(folder) else [])
                      if re.fullmatch(r'shard_\d{6}\.npz', name)
                      and int(name[6:12]) >= manifest['shards'])
    if unlisted:  # indexing only the listed ones would drop images without a word
        raise ShardsManifestError(
            f'{osp.join(out_dir, SHARDS_MANIFEST)} lists {manifest["shards"]} shards, but '
            f'{folder} also holds {", ".join(unlisted[:3])}{" ..." if len(unlisted) > 3 else ""}'
            '; expected the shards of one extraction: extract again into a new folder')
    missing = [p for p in paths if not osp.isfile(p)]
    if missing:
        raise MissingShardsError(
            f'{len(missing)} of {len(paths)} shards are missing '
            f'({", ".join(missing[:3])}{" ..." if len(missing) > 3 else ""}): the extraction '
            'is not finished; run it again', remedy=dict(resume=True))
    return paths


def merge_shards(out_dir: str, identity: Optional[dict] = None) -> EmbeddingSet:
    """The shards of ``out_dir`` in order, as one set. ``identity`` defaults to the one the
    first shard records."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} not found: {out_dir} holds no sharded extraction')
    manifest = read_shards_manifest(out_dir)
    embeddings, ids, failed = [], [], []
    for shard_file in shard_paths(out_dir, manifest):
        shard = load_embeddings(shard_file)
        if shard.ids is None:
            raise ValueError(f'{shard_file}: a shard without ids; expected one '
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
    every rank of a started ``torch.distributed`` group: rank 0 writes (or checks) the
    manifest, rank ``r`` embeds the missing shards ``i % world_size == r`` (each written
    atomically), rank 0 merges them.

    Returns:
        (the merged set on rank 0, None on the others; the shards this rank computed).
    """
    distributed = dist.is_available() and dist.is_initialized()
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    paths = list(paths)
    if shard_size < 1:
        raise ArgumentError(f'shard_size must be positive, got {shard_size}', 'shard_size')
    identity = identity or model_identity(model)
    # Each phase ends where the ranks meet, with every rank told of an error on any (rank 0's
    # manifest, a shard's non-finite embeddings): no rank waits for the others' timeout.
    with _ranked(rank, world, 'the extraction\'s manifest'):
        if rank == 0:  # the manifest is written (or checked) before the others look at it
            prepare_shards(model, out_dir, paths, shard_size, resume, identity=identity)
    computed = []
    with _ranked(rank, world, 'the extraction\'s shards'):
        if rank > 0:  # every rank's job (its image list, its model) is rank 0's
            prepare_shards(model, out_dir, paths, shard_size, True, write=False,
                           identity=identity)
        count = -(-len(paths) // shard_size)
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
    return (merge_shards(out_dir, identity) if rank == 0 else None), computed


@contextlib.contextmanager
def _ranked(rank: int, world: int, what: str):
    """One phase of a sharded extraction: on several ranks, an error names its rank and every
    rank learns of it before going on (:func:`~irtbox.utils.dist.fail_together`)."""
    if world == 1:
        yield
        return
    with fail_together(what):
        try:
            yield
        except (FileNotFoundError, FileExistsError, ValueError) as err:
            raise with_prefix(err, f'rank {rank}') from err


def extract_folder(config, checkpoint: Optional[str], image_dir: str, out_dir: str,
                   batch_size: int = 32, num_workers: int = 2, shard_size: int = 4096,
                   resume: bool = False, launcher: str = 'none', cfg_options: Optional[dict] = None,
                   device: Optional[str] = None, progress: bool = True) -> Optional[EmbeddingSet]:
    """Embed every image under ``image_dir`` into ``out_dir/features.npz`` (ids = the image
    paths), in resumable shards, on this process or every rank of a distributed job.

    Args:
        checkpoint: None: the config's own weights.
        shard_size: images per shard (progress is saved after each).
        resume: keep the shards an interrupted run of the same job wrote.
        launcher: ``'none'`` (this process), ``'pytorch'`` (torchrun) or ``'slurm'``.
        device: default the rank's GPU when CUDA is available, else the CPU.

    Returns:
        EmbeddingSet: what ``features.npz`` holds, on rank 0; None on the other ranks.
    """

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
