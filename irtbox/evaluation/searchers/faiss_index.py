"""faiss indexes for inner-product search: imported with a clear error, built from a factory
string, trained, given their search parameters, moved to a GPU and back. The one place
irtbox does this, for :class:`~irtbox.evaluation.searchers.FaissSearcher` (and through it
``ImageSearcher``)."""
import warnings
from typing import Optional, Union

import numpy as np
import torch

from irtbox.utils.checks import check_positive_int

__all__ = [
    'FAISS_GPU_MAX_K', 'import_faiss', 'min_training_vectors', 'build_index', 'train_index',
    'has_ivf', 'faiss_has_gpu', 'gpu_device_id', 'float16_lookup_tables', 'to_gpu', 'on_gpu',
    'to_cpu', 'set_search_parameter'
]

Device = Optional[Union[str, torch.device]]
# faiss-gpu selects at most this many neighbours per query, and probes at most this many
# IVF lists.
FAISS_GPU_MAX_K = 2048
# IVF-PQ codes of this many bytes or more make float32 lookup tables larger than a GPU's
# shared memory; faiss-gpu then needs them in float16.
_FLOAT16_PQ_BYTES = 56


def import_faiss():
    """The faiss module, or an ImportError that says how to install it."""
    try:
        import faiss
    except ImportError as e:
        raise ImportError('FaissSearcher needs faiss: pip install faiss-cpu (or '
                          'faiss-gpu-cu12 for search on a GPU).') from e
    return faiss


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
    """An empty inner-product CPU index; ``'Flat'`` is exact (``IndexFlatIP``)."""
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


def faiss_has_gpu() -> bool:
    """Whether faiss was built with GPU support and sees a GPU."""
    faiss = import_faiss()
    return hasattr(faiss, 'StandardGpuResources') and faiss.get_num_gpus() > 0


def gpu_device_id(device: Device) -> int:
    """The number of CUDA ``device``; for a bare ``'cuda'`` the process's current device
    (under a distributed launcher, the local rank's), not GPU 0."""
    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


def float16_lookup_tables(index) -> bool:
    """Whether faiss-gpu needs float16 lookup tables for the CPU index ``index``: an IVF-PQ
    index with codes of 56 bytes or more, whose float32 tables exceed a GPU's shared memory
    (faiss refuses to move it otherwise)."""
    faiss = import_faiss()
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return False
    ivf = faiss.downcast_index(ivf)
    return isinstance(ivf, faiss.IndexIVFPQ) and ivf.pq.code_size >= _FLOAT16_PQ_BYTES


def to_gpu(index, device: Device, temp_memory: Optional[int] = None,
           name: Optional[str] = None):
    """The CPU index ``index`` on ``device`` when that is a CUDA device; otherwise ``index``
    itself.

    Search parameters already set (``nprobe``) move with it. An index faiss cannot put on a
    GPU (faiss without GPU support; HNSW and plain PQ, which have no GPU version; an nprobe
    above :data:`FAISS_GPU_MAX_K`) stays on the CPU, with a warning that says why.

    Args:
        index: a CPU faiss index.
        device: e.g. ``'cuda'`` (the current CUDA device), ``'cuda:1'``, ``'cpu'``.
        temp_memory: bytes of scratch memory faiss reserves on the GPU (``None``: faiss's
            default).
        name: what the warning calls the index, e.g. its factory string (default: its
            class).
    """
    if device is None or torch.device(device).type != 'cuda':
        return index
    if not faiss_has_gpu():
        warnings.warn('faiss has no GPU support here (install faiss-gpu-cu12); searching on '
                      'the CPU.')
        return index
    faiss = import_faiss()
    resources = faiss.StandardGpuResources()
    if temp_memory is not None:
        resources.setTempMemory(int(temp_memory))
    options = faiss.GpuClonerOptions()
    options.useFloat16 = float16_lookup_tables(index)
    try:
        return faiss.index_cpu_to_gpu(resources, gpu_device_id(device), index, options)
    except RuntimeError as err:
        name = name or type(faiss.downcast_index(index)).__name__
        warnings.warn(f'faiss cannot put index {name} on the GPU ({err}); it stays on the '
                      'CPU.')
        return index


def on_gpu(index) -> bool:
    """Whether any part of ``index`` is on a GPU: the index itself, or one inside a wrapper
    (``IndexPreTransform``, ``IndexIDMap``, ``IndexRefine``), which keeps its CPU class."""
    faiss = import_faiss()
    if not hasattr(faiss, 'GpuIndex'):
        return False
    index = faiss.downcast_index(index)
    if isinstance(index, faiss.GpuIndex):
        return True
    inner = (getattr(index, name, None) for name in ('index', 'base_index', 'refine_index'))
    return any(on_gpu(part) for part in inner if part is not None)


def to_cpu(index):
    """``index`` on the CPU (what faiss can write to a file): a CPU copy of an index with
    any part on a GPU, a CPU index itself."""
    return import_faiss().index_gpu_to_cpu(index) if on_gpu(index) else index


def set_search_parameter(index, name: str, value: int) -> None:
    """Set the search parameter ``name`` (``'nprobe'``, ``'efSearch'``) of ``index``, on the
    CPU or a GPU, through wrappers such as ``IndexPreTransform``.

    faiss's ``ParameterSpace`` does not reach GPU IVF indexes; ``GpuParameterSpace`` (in a
    faiss with GPU support) does, and sets everything else as ``ParameterSpace`` does.

    Raises:
        ValueError: ``value`` is not a positive integer; ``index`` has no such parameter
            (e.g. nprobe of a Flat or HNSW index); an nprobe above what faiss-gpu probes on
            a GPU index.
    """
    faiss = import_faiss()
    value = check_positive_int(value, name)
    if name == 'nprobe' and value > FAISS_GPU_MAX_K and on_gpu(index):
        raise ValueError(f'faiss-gpu probes at most {FAISS_GPU_MAX_K} IVF lists, got '
                         f'nprobe={value}; use a smaller nprobe or search on the CPU.')
    space = faiss.GpuParameterSpace() if hasattr(faiss, 'GpuParameterSpace') else \
        faiss.ParameterSpace()
    try:
        space.set_index_parameter(index, name, int(value))
    except RuntimeError as err:
        raise ValueError(f'faiss index {type(faiss.downcast_index(index)).__name__} has no '
                         f'search parameter {name}={value} (nprobe is one of IVF indexes, '
                         'efSearch of HNSW ones).') from err
