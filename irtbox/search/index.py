"""faiss indexes for inner-product (cosine) search: built from a factory string, trained when
the index type needs it, moved to a GPU when there is one."""
from typing import Optional

import numpy as np

from irtbox.evaluation.functional.search import import_faiss

__all__ = ['min_training_vectors', 'build_index', 'train_index', 'to_gpu', 'to_cpu']


def min_training_vectors(factory: str) -> int:
    """The fewest training vectors faiss accepts for ``factory``: one per IVF list, 256 per
    PQ codebook (8-bit codes); 0 for indexes that need no training."""
    need = 0
    for part in factory.replace(' ', '').split(','):
        upper = part.upper()
        if upper.startswith('IVF'):
            digits = ''.join(c for c in upper[3:] if c.isdigit())
            need = max(need, int(digits) if digits else 0)
        elif upper.startswith('PQ') or upper.startswith('SQ'):
            need = max(need, 256 if upper.startswith('PQ') else 1)
    return need


def build_index(factory: str, dim: int):
    """An empty inner-product faiss index; ``'Flat'`` is exact (``IndexFlatIP``)."""
    faiss = import_faiss()
    try:
        return faiss.index_factory(int(dim), factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise ValueError(f'faiss cannot build index {factory!r} for {dim}-d vectors: {err}. '
                         "Examples: 'Flat' (exact), 'IVF1024,Flat', 'IVF4096,PQ32', "
                         "'HNSW32'.") from err


def train_index(index, vectors: np.ndarray, factory: str) -> None:
    """Train ``index`` on ``vectors`` when its type needs it, with a clear error when there
    are too few (faiss would otherwise warn or crash deep inside)."""
    if index.is_trained:
        return
    need = min_training_vectors(factory)
    if len(vectors) < need:
        raise ValueError(f'index {factory!r} needs at least {need} vectors to train, got '
                         f'{len(vectors)}; use fewer lists (e.g. IVF{max(1, len(vectors) // 39)},'
                         "Flat) or the exact 'Flat' index for a collection this small.")
    index.train(np.ascontiguousarray(vectors, dtype=np.float32))


def to_gpu(index, device: Optional[str]):
    """``index`` on the GPU when ``device`` is a CUDA device and faiss has GPU support."""
    if device is None or not str(device).startswith('cuda'):
        return index
    faiss = import_faiss()
    if not hasattr(faiss, 'StandardGpuResources') or faiss.get_num_gpus() == 0:
        return index
    gpu_id = int(str(device).split(':')[1]) if ':' in str(device) else 0
    return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), gpu_id, index)


def to_cpu(index):
    """A CPU copy of ``index`` (what faiss can write to a file)."""
    faiss = import_faiss()
    if hasattr(faiss, 'index_gpu_to_cpu') and 'Gpu' in type(index).__name__:
        return faiss.index_gpu_to_cpu(index)
    return index
