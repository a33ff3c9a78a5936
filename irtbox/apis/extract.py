"""Embeddings of your own images: a folder, a list of files or arrays, through the config's test
pipeline; for big collections in resumable shards, on one process or several.

Unreadable files (corrupt, truncated, empty, not images) are skipped, counted and listed (in the
result, a warning and ``features.npz``): never a crash an hour in, never a silent drop.
"""
import hashlib
import json
import logging
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.logging import print_log

from irtbox.utils.fileio import atomic_write, atomic_write_text

__all__ = ['ExtractionResult', 'list_images', 'extract_features', 'prepare_shards',
           'extract_to_shards', 'merge_shards', 'save_features']

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')
SHARDS_MANIFEST = 'shards.json'
# Failed images named in the warning (all of them are in the result).
SHOWN_FAILURES = 5


@dataclass
class ExtractionResult:
    """``embeddings``: N x D float32, row i is the image ``ids[i]`` (its path, or ``array:<i>``
    for the i-th input array); ``failed``: (id, reason) of the images that could not be read,
    in input order."""
    embeddings: np.ndarray
    ids: List[str]
    failed: List[Tuple[str, str]] = field(default_factory=list)


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

    from irtbox.models.input_spec import input_spec_of
    spec = input_spec_of(model, 'extract_features')
    if batch_size < 1:
        raise ValueError(f'extract_features: batch_size must be positive, got {batch_size}')
    dataset = _ImageDataset(items, spec)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                                         collate_fn=_collate, shuffle=False)
    embeddings, ids, failed = [], [], []
    model.eval()
    with torch.inference_mode(), tqdm(total=len(items), desc=desc, unit='img',
                                      disable=not progress) as bar:
        for batch in loader:
            failed += batch['failed']
            if batch['ids']:
                embeddings.append(_embed_batch(model, batch['inputs']).float().cpu().numpy())
                ids += batch['ids']
            bar.update(batch['size'])
    if not embeddings:
        return np.zeros((0, 0), np.float32), ids, failed
    return np.concatenate(embeddings).astype(np.float32, copy=False), ids, failed


def _warn_failed(failed: Sequence[Tuple[str, str]], total: int) -> None:
    if failed:
        shown = '; '.join(f'{path} ({reason})' for path, reason in failed[:SHOWN_FAILURES])
        more = f' and {len(failed) - SHOWN_FAILURES} more' if len(failed) > SHOWN_FAILURES else ''
        print_log(f'{len(failed)} of {total} images could not be read and were skipped: '
                  f'{shown}{more}', logger='current', level=logging.WARNING)


def extract_features(model, images: Union[str, Sequence], batch_size: int = 32,
                     num_workers: int = 0, progress: bool = True,
                     device: Optional[Union[str, torch.device]] = None) -> ExtractionResult:
    """Embeddings of ``images``, preprocessed by the config's test pipeline exactly as
    ``tools/test.py`` does (and with the model's multi-scale test and whitening, if any).

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

    Returns:
        ExtractionResult: N x D float32 L2-normalised embeddings and the ids of the images
        read; unreadable files are in ``failed`` and a warning, not in the embeddings.
    """
    items = _as_items(images)
    if device is not None:
        model.to(device)
    embeddings, ids, failed = _embed_items(model, items, batch_size, num_workers, progress)
    _warn_failed(failed, len(items))
    return ExtractionResult(embeddings, ids, failed)


# Shards: big collections, resumable, several processes.

def _shard_path(out_dir: str, index: int) -> str:
    return osp.join(out_dir, 'shards', f'shard_{index:06d}.npz')


def _atomic_savez(path: str, **arrays) -> None:
    """``np.savez`` written whole or not at all (:func:`atomic_write`)."""
    atomic_write(path, lambda tmp: np.savez(tmp, **arrays))


def _result_arrays(embeddings: np.ndarray, ids: Sequence[str],
                   failed: Sequence[Tuple[str, str]]) -> Dict[str, np.ndarray]:
    # Fixed-width unicode arrays (not objects): readable with np.load's allow_pickle=False.
    return dict(embeddings=embeddings.astype(np.float32, copy=False), ids=np.array(ids, str),
                failed_ids=np.array([f[0] for f in failed], str),
                failed_reasons=np.array([f[1] for f in failed], str))


def _job_manifest(model, paths: Sequence[str], shard_size: int) -> dict:
    """What a resumed extraction must share with the first one: images, sharding, and the
    model's weights and preprocessing (else two models' embeddings would be merged)."""
    from .identity import COMPARED, model_identity
    identity = model_identity(model)
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
                   write: bool = True) -> None:
    """Write the manifest ``out_dir/shards.json`` of an extraction (``write``), or check that
    the one there describes the same job (image list, shard size, model) and that ``resume``
    allows continuing it. Raises FileExistsError / ValueError naming what differs."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    wanted = _job_manifest(model, paths, shard_size)
    if osp.isfile(path):
        if not resume:
            raise FileExistsError(f'{out_dir} holds shards of an earlier extraction; pass '
                                  '--resume (resume=True) to continue it, or choose another '
                                  'output folder')
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


def extract_to_shards(model, paths: Sequence[str], out_dir: str, shard_size: int = 4096,
                      rank: int = 0, world_size: int = 1, batch_size: int = 32,
                      num_workers: int = 0, resume: bool = False, progress: bool = True,
                      device: Optional[Union[str, torch.device]] = None) -> List[int]:
    """Embed ``paths`` in shards of ``shard_size`` images, each written to
    ``out_dir/shards/shard_<i:06d>.npz`` (embeddings, ids, failed_ids, failed_reasons)
    atomically as soon as it is done; rank ``r`` of ``world_size`` takes the shards
    ``i % world_size == r``. Shards already there are kept when ``resume`` is set (the job must
    be the same: see :func:`prepare_shards`), refused otherwise.

    With several processes, rank 0 runs :func:`prepare_shards` (with the user's ``resume``)
    before the others start (a barrier), and every rank then passes ``resume=True``.

    Returns:
        list[int]: the shards this call computed.
    """
    paths = list(paths)
    if shard_size < 1:
        raise ValueError(f'shard_size must be positive, got {shard_size}')
    if device is not None:
        model.to(device)
    prepare_shards(model, out_dir, paths, shard_size, resume, write=rank == 0)
    count = -(-len(paths) // shard_size)
    done = []
    for index in range(rank, count, world_size):
        target = _shard_path(out_dir, index)
        if osp.isfile(target):
            continue
        chunk = paths[index * shard_size:(index + 1) * shard_size]
        embeddings, ids, failed = _embed_items(model, chunk, batch_size, num_workers, progress,
                                               desc=f'shard {index + 1}/{count}')
        _atomic_savez(target, **_result_arrays(embeddings, ids, failed))
        done.append(index)
    return done


def merge_shards(out_dir: str) -> ExtractionResult:
    """The shards of ``out_dir`` in order, as one result (and a warning listing the unreadable
    images); a missing shard is an error naming it."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{path} not found: {out_dir} holds no sharded extraction')
    with open(path) as f:
        manifest = json.load(f)
    missing = [_shard_path(out_dir, i) for i in range(manifest['shards'])
               if not osp.isfile(_shard_path(out_dir, i))]
    if missing:
        raise FileNotFoundError(f'{len(missing)} of {manifest["shards"]} shards are missing '
                                f'({", ".join(missing[:3])}{" ..." if len(missing) > 3 else ""})'
                                ': the extraction is not finished; run it again with --resume')
    embeddings, ids, failed = [], [], []
    for index in range(manifest['shards']):
        with np.load(_shard_path(out_dir, index)) as shard:
            if len(shard['ids']):
                embeddings.append(shard['embeddings'])
            ids += shard['ids'].tolist()
            failed += list(zip(shard['failed_ids'].tolist(), shard['failed_reasons'].tolist()))
    _warn_failed(failed, manifest['images'])
    return ExtractionResult(np.concatenate(embeddings) if embeddings
                            else np.zeros((0, 0), np.float32), ids, failed)


def save_features(path: str, result: ExtractionResult, **extra) -> None:
    """``result`` as ``.npz`` (embeddings, ids, failed_ids, failed_reasons, plus ``extra``
    arrays), written atomically."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    _atomic_savez(path, **_result_arrays(result.embeddings, result.ids, result.failed),
                  **{k: np.asarray(v) for k, v in extra.items()})
