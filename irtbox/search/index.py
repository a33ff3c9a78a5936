"""faiss indexes for inner-product (cosine) search: built from a factory string, trained when
the index type needs it. Moving them to a GPU and back, and setting their search
parameters, is ``irtbox.evaluation.functional.search``'s (one implementation for both)."""
import numpy as np

from irtbox.evaluation.functional.search import import_faiss

__all__ = ['min_training_vectors', 'build_index', 'train_index', 'has_ivf']


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


def has_ivf(index) -> bool:
    """Whether the CPU index ``index`` is (or wraps) an IVF index, which has an nprobe."""
    return import_faiss().try_extract_index_ivf(index) is not None
