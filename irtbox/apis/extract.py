"""Embeddings of your own images: a folder, a list of files or arrays, through the config's test
pipeline; for big collections in resumable shards, on one process or several.

Unreadable files (corrupt, truncated, not images) are skipped, counted and listed (in the
result, the log and ``features.npz``), never a crash an hour in and never a silent drop.
"""
import hashlib
import json
import logging
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import List, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.logging import print_log

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')
SHARDS_MANIFEST = 'shards.json'


@dataclass
class ExtractionResult:
    """``embeddings``: N x D float32 (row i is image ``ids[i]``); ``failed``: (id, reason) of
    the images that could not be read, in input order."""
    embeddings: np.ndarray
    ids: List[str]
    failed: List[Tuple[str, str]] = field(default_factory=list)


def list_images(folder: str, recursive: bool = True) -> List[str]:
    """The image files under ``folder`` (by extension, any case), sorted."""
    if not osp.isdir(folder):
        raise FileNotFoundError(f'image folder not found: {folder}')
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found += [osp.join(root, f) for f in files if f.lower().endswith(IMAGE_EXTENSIONS)]
        if not recursive:
            break
    if not found:
        raise ValueError(f'no images ({", ".join(IMAGE_EXTENSIONS)}) under {folder}')
    return sorted(found)


def _as_items(images) -> List:
    if isinstance(images, str):
        return list_images(images) if osp.isdir(images) else [images]
    if isinstance(images, np.ndarray) and images.ndim == 3:
        return [images]
    return list(images)


class _ImageDataset(torch.utils.data.Dataset):
    """Paths or H x W x 3 RGB uint8 arrays through a test pipeline; a failure is a result."""

    def __init__(self, items: Sequence, pipeline: Sequence[dict]):
        from mmengine.dataset import Compose
        from mmengine.registry import DefaultScope

        from irtbox.registry import TRANSFORMS
        self.items = items
        with DefaultScope.overwrite_default_scope('irtbox'):
            self.pipeline = Compose([TRANSFORMS.build(t) for t in pipeline])
            # Arrays are already decoded: the pipeline after LoadImageFromFile.
            self.array_pipeline = Compose([TRANSFORMS.build(t) for t in pipeline
                                           if t.get('type') != 'LoadImageFromFile'])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        item = self.items[index]
        name = item if isinstance(item, str) else f'array:{index}'
        try:
            if isinstance(item, str):
                results = self.pipeline(dict(img_path=item, sample_idx=index))
            else:
                results = self.array_pipeline(_array_results(item, index))
            if results is None:
                raise ValueError('the pipeline dropped it')
        except Exception as err:  # any decoding / transform failure: report it, go on
            return dict(id=name, error=f'{type(err).__name__}: {err}'.strip())
        return dict(id=name, inputs=results['inputs'], data_samples=results['data_samples'])


def _array_results(array, index) -> dict:
    array = np.asarray(array)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise ValueError(f'expected an H x W x 3 uint8 RGB array, got {array.dtype} '
                         f'{array.shape}')
    # The file pipeline decodes to BGR (mmcv); arrays are given as RGB.
    img = np.ascontiguousarray(array[..., ::-1])
    return dict(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2], sample_idx=index)


def _collate(batch):
    return batch


def _embed_items(model, items, batch_size, num_workers, progress, desc='embedding'):
    """(embeddings, ids, failed) of ``items`` in order."""
    from mmengine.dataset import pseudo_collate
    from tqdm import tqdm

    from irtbox.utils.config import eval_pipeline
    if getattr(model, 'cfg', None) is None:
        raise ValueError('extract_features: the model has no config (model.cfg); build it '
                         'with irtbox.apis.init_model or get_model')
    dataset = _ImageDataset(items, eval_pipeline(model.cfg))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                                         collate_fn=_collate, shuffle=False)
    embeddings, ids, failed = [], [], []
    model.eval()
    with torch.inference_mode(), tqdm(total=len(items), desc=desc, unit='img',
                                      disable=not progress) as bar:
        for batch in loader:
            good = [b for b in batch if 'error' not in b]
            failed += [(b['id'], b['error']) for b in batch if 'error' in b]
            if good:
                data = model.data_preprocessor(pseudo_collate(
                    [dict(inputs=b['inputs'], data_samples=b['data_samples']) for b in good]),
                    False)
                embeddings.append(model(data['inputs'], mode='tensor').float().cpu().numpy())
                ids += [b['id'] for b in good]
            bar.update(len(batch))
    dim = embeddings[0].shape[1] if embeddings else 0
    return (np.concatenate(embeddings) if embeddings else np.zeros((0, dim), np.float32),
            ids, failed)


def _warn_failed(failed, total):
    if failed:
        shown = '; '.join(f'{path} ({reason})' for path, reason in failed[:5])
        print_log(f'{len(failed)} of {total} images could not be read and were skipped: '
                  f'{shown}{" ..." if len(failed) > 5 else ""}', logger='current',
                  level=logging.WARNING)


def extract_features(model, images: Union[str, Sequence], batch_size: int = 32,
                     num_workers: int = 0, progress: bool = True) -> ExtractionResult:
    """Embeddings of ``images`` (a folder, an image path, a list of paths, or H x W x 3 RGB
    uint8 arrays), preprocessed by the config's test pipeline exactly as ``tools/test.py``
    does (multi-scale and whitening when the model has them).

    Args:
        model: a retriever from ``init_model`` / ``get_model`` (it carries ``model.cfg``).
        batch_size: images per forward pass.
        num_workers: image-decoding processes (0: in this process).
        progress: a progress bar over images.
    """
    items = _as_items(images)
    embeddings, ids, failed = _embed_items(model, items, batch_size, num_workers, progress)
    _warn_failed(failed, len(items))
    return ExtractionResult(embeddings.astype(np.float32), ids, failed)


# Shards: big collections, resumable, several processes.

def _list_digest(paths: Sequence[str]) -> str:
    return hashlib.sha256('\n'.join(paths).encode()).hexdigest()


def _shard_path(out_dir: str, index: int) -> str:
    return osp.join(out_dir, 'shards', f'shard_{index:06d}.npz')


def _atomic_savez(path: str, **arrays) -> None:
    tmp = f'{path}.{os.getpid()}.tmp.npz'
    np.savez(tmp, **arrays)
    with open(tmp, 'rb') as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def prepare_shards(out_dir: str, paths: Sequence[str], shard_size: int, resume: bool,
                   write: bool = True) -> None:
    """Write the shard manifest of ``out_dir`` (``write``), or check that an existing one
    describes the same job (image list and shard size) and that ``resume`` allows it."""
    path = osp.join(out_dir, SHARDS_MANIFEST)
    wanted = dict(images=len(paths), images_sha256=_list_digest(paths), shard_size=shard_size,
                  shards=-(-len(paths) // shard_size))
    if osp.isfile(path):
        if not resume:
            raise FileExistsError(f'{out_dir} holds shards of an earlier extraction; pass '
                                  '--resume to continue it, or choose another output folder')
        with open(path) as f:
            found = json.load(f)
        if found != wanted:
            changed = [k for k in wanted if found.get(k) != wanted[k]]
            raise ValueError(f'cannot resume in {out_dir}: the earlier extraction had other '
                             f'{", ".join(changed)} ({ {k: found.get(k) for k in changed} } vs '
                             f'{ {k: wanted[k] for k in changed} }); use a new output folder')
    elif not write:
        raise FileNotFoundError(f'{path} is missing: rank 0 prepares the shards first')
    else:
        os.makedirs(osp.join(out_dir, 'shards'), exist_ok=True)
        with open(path + '.tmp', 'w') as f:
            json.dump(wanted, f)
        os.replace(path + '.tmp', path)


def extract_to_shards(model, paths: Sequence[str], out_dir: str, shard_size: int = 4096,
                      rank: int = 0, world_size: int = 1, batch_size: int = 32,
                      num_workers: int = 0, resume: bool = False,
                      progress: bool = True) -> List[int]:
    """Embed ``paths`` in shards of ``shard_size`` images written to
    ``out_dir/shards/shard_<i>.npz`` (atomically); rank ``r`` of ``world_size`` takes the
    shards ``i % world_size == r``. With ``resume`` the shards already written are kept
    (the job must be the same: image list and shard size). With several processes, rank 0
    runs :func:`prepare_shards` before the others start (a barrier), and every rank then
    passes ``resume=True``. Returns the shards computed."""
    paths = list(paths)
    if shard_size < 1:
        raise ValueError(f'shard_size must be positive, got {shard_size}')
    prepare_shards(out_dir, paths, shard_size, resume, write=rank == 0)
    os.makedirs(osp.join(out_dir, 'shards'), exist_ok=True)
    count = -(-len(paths) // shard_size)
    done = []
    for index in range(rank, count, world_size):
        target = _shard_path(out_dir, index)
        if osp.isfile(target):
            continue
        chunk = paths[index * shard_size:(index + 1) * shard_size]
        embeddings, ids, failed = _embed_items(model, chunk, batch_size, num_workers, progress,
                                               desc=f'shard {index + 1}/{count}')
        _atomic_savez(target, embeddings=embeddings.astype(np.float32), ids=np.array(ids),
                      failed_ids=np.array([f[0] for f in failed]),
                      failed_reasons=np.array([f[1] for f in failed]))
        done.append(index)
    return done


def merge_shards(out_dir: str) -> ExtractionResult:
    """The shards of ``out_dir`` in order, as one result; a missing shard is an error."""
    with open(osp.join(out_dir, SHARDS_MANIFEST)) as f:
        manifest = json.load(f)
    embeddings, ids, failed = [], [], []
    for index in range(manifest['shards']):
        path = _shard_path(out_dir, index)
        if not osp.isfile(path):
            raise FileNotFoundError(f'shard {path} is missing: the extraction is not finished '
                                    '(run it again with --resume)')
        with np.load(path) as shard:
            embeddings.append(shard['embeddings'])
            ids += shard['ids'].tolist()
            failed += list(zip(shard['failed_ids'].tolist(), shard['failed_reasons'].tolist()))
    dims = {e.shape[1] for e in embeddings if len(e)}
    result = ExtractionResult(np.concatenate([e for e in embeddings if len(e)])
                              if dims else np.zeros((0, 0), np.float32), ids, failed)
    _warn_failed(failed, manifest['images'])
    return result


def save_features(path: str, result: ExtractionResult, **extra) -> None:
    """``result`` as ``.npz`` (embeddings, ids, failed_ids, failed_reasons), atomically."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    _atomic_savez(path, embeddings=result.embeddings, ids=np.array(result.ids),
                  failed_ids=np.array([f[0] for f in result.failed]),
                  failed_reasons=np.array([f[1] for f in result.failed]),
                  **{k: np.asarray(v) for k, v in extra.items()})
