"""faiss indexes for inner-product search: :class:`FaissIndex`, the one object that holds a
faiss index, and the helpers it is made of."""
import errno
import re
import warnings
from typing import Optional, Tuple, Union

import numpy as np
import torch

from irtbox.utils.checks import check_positive_int
from irtbox.utils.errors import ArgumentError, IrtboxError
from irtbox.utils.fileio import atomic_write

__all__ = [
    'FaissIndex', 'GpuTopKError', 'IndexIntegrityError', 'FAISS_GPU_MAX_K', 'DEFAULT_NPROBE',
    'import_faiss', 'min_training_vectors', 'empty_index', 'train_index',
    'has_ivf', 'float16_lookup_tables', 'to_gpu', 'on_gpu', 'to_cpu', 'set_search_parameter'
]

Device = Optional[Union[str, torch.device]]
# faiss-gpu selects at most this many neighbours per query, and probes at most this many IVF lists.
FAISS_GPU_MAX_K = 2048
# IVF-PQ codes of this many bytes or more make float32 lookup tables larger than a GPU's
# shared memory; faiss-gpu then needs them in float16.
_FLOAT16_PQ_BYTES = 56
# IVF lists visited per query when nprobe is not given (faiss's own default, 1, misses
# most neighbours of any index with more than a few lists).
DEFAULT_NPROBE = 16


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
        if upper.startswith('IVF'):  # IVF4096, IVF4096_HNSW32: the lists' count
            lists = re.match(r'IVF(\d*)', upper).group(1)
            need = max(need, int(lists) if lists else 0)
        elif upper.startswith('PQ') or upper.startswith('SQ'):
            need = max(need, 256 if upper.startswith('PQ') else 1)
    return need


def empty_index(factory: str, dim: int):
    """An empty inner-product CPU index; ``'Flat'`` is exact (``IndexFlatIP``)."""
    faiss = import_faiss()
    try:
        return faiss.index_factory(int(dim), factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise ArgumentError(f'faiss cannot build index {factory!r} for {dim}-d vectors: {err}.'
                            " Examples: 'Flat' (exact), 'IVF1024,Flat', 'IVF4096,PQ32', "
                            "'HNSW32'.", 'factory', factory) from err


def train_index(index, vectors: np.ndarray, factory: str) -> None:
    """Train ``index`` on ``vectors`` when its type needs it, with a clear error when there
    are too few (faiss would otherwise warn or crash deep inside)."""
    if index.is_trained:
        return
    need = min_training_vectors(factory)
    if len(vectors) < need:
        raise ArgumentError(f'index {factory!r} needs at least {need} vectors to train, got '
                            f'{len(vectors)}; use fewer lists (e.g. IVF'
                            f"{max(1, len(vectors) // 39)},Flat) or the exact 'Flat' index for "
                            'a collection this small.', 'factory', factory)
    index.train(np.ascontiguousarray(vectors, dtype=np.float32))


def has_ivf(index) -> bool:
    """Whether the CPU index ``index`` is (or wraps) an IVF index, which has an nprobe."""
    return import_faiss().try_extract_index_ivf(index) is not None


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
    """The CPU index ``index`` on ``device`` when that is a CUDA device, else ``index`` itself;
    search parameters set move with it. An index faiss cannot put on a GPU (no GPU support,
    HNSW, plain PQ, nprobe above :data:`FAISS_GPU_MAX_K`) stays on the CPU with a warning
    naming it ``name`` (default: its class)."""
    if device is None or torch.device(device).type != 'cuda':
        return index
    faiss = import_faiss()
    if not hasattr(faiss, 'StandardGpuResources') or faiss.get_num_gpus() == 0:
        warnings.warn('faiss has no GPU support here (install faiss-gpu-cu12); searching on '
                      'the CPU.')
        return index
    # A bare 'cuda' is the process's current device (under a distributed launcher, the
    # local rank's), not GPU 0.
    device = torch.device(device)
    gpu = device.index if device.index is not None else torch.cuda.current_device()
    resources = faiss.StandardGpuResources()
    if temp_memory is not None:
        resources.setTempMemory(int(temp_memory))
    options = faiss.GpuClonerOptions()
    options.useFloat16 = float16_lookup_tables(index)
    try:
        return faiss.index_cpu_to_gpu(resources, gpu, index, options)
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
    """``index`` on the CPU (what faiss can write to a file)."""
    return import_faiss().index_gpu_to_cpu(index) if on_gpu(index) else index


def set_search_parameter(index, name: str, value: int) -> None:
    """Set the search parameter ``name`` (``'nprobe'``, ``'efSearch'``) of ``index``, on the
    CPU or a GPU (``GpuParameterSpace``: ``ParameterSpace`` does not reach GPU IVF indexes),
    through wrappers such as ``IndexPreTransform``."""
    faiss = import_faiss()
    value = check_positive_int(value, name)
    if name == 'nprobe' and value > FAISS_GPU_MAX_K and on_gpu(index):
        raise ArgumentError(f'faiss-gpu probes at most {FAISS_GPU_MAX_K} IVF lists, got '
                            f'nprobe={value}; use a smaller nprobe or search on the CPU.',
                            'nprobe', value)
    space = faiss.GpuParameterSpace() if hasattr(faiss, 'GpuParameterSpace') else \
        faiss.ParameterSpace()
    try:
        space.set_index_parameter(index, name, int(value))
    except RuntimeError as err:
        raise ArgumentError(f'faiss index {type(faiss.downcast_index(index)).__name__} has no '
                            f'search parameter {name}={value} (nprobe is one of IVF indexes, '
                            'efSearch of HNSW ones).', name, value) from err


class GpuTopKError(IrtboxError, ValueError):
    """A search for more neighbours per query (``k``) than faiss-gpu returns (``limit``)."""

    def __init__(self, k: int):
        self.k, self.limit = k, FAISS_GPU_MAX_K
        super().__init__(f'faiss on the GPU returns at most {FAISS_GPU_MAX_K} hits per query, '
                         f"got k={k}; ask for fewer or search on the CPU (device='cpu')")


class IndexIntegrityError(IrtboxError, ValueError):
    """A file of an index (``path``) that is not the one recorded (edited, damaged, cut short,
    missing) or that its reader cannot read; rebuilding the index is the remedy."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


class FaissIndex:
    """A faiss inner-product index that persists: made from a factory string, trained on the
    first vectors added, searched, saved, loaded and moved to a device. ``'Flat'`` is exact.
    On a CUDA device the index moves to that GPU when faiss has a GPU version of its type
    (else it stays on the CPU with a warning); a search there for more than
    :data:`FAISS_GPU_MAX_K` neighbours is a :class:`GpuTopKError`, never a silent CPU copy.

    Args:
        factory: the faiss factory string (a list of its parts is joined).
        nprobe: IVF lists visited per query (default 16); an index without lists refuses one.
        ef_search: HNSW's search breadth (default: faiss's); other indexes refuse one.
        device: None: the CPU.
        gpu_temp_memory: bytes of GPU scratch memory (default: faiss's own).

    Attributes:
        index: the faiss index, None until vectors are added (or one is loaded).
        capped: the first re-ranked search of this index whose candidates faiss-gpu's limit
            cut (``asked``, ``searched``, ``k``, ``k_factor``;
            :func:`~irtbox.evaluation.neighbours.index.search_reranked`), else None.
    """

    def __init__(self, factory: str = 'Flat', nprobe: Optional[int] = None,
                 ef_search: Optional[int] = None, device: Device = None,
                 gpu_temp_memory: Optional[int] = None):
        if isinstance(factory, (list, tuple)):  # a config override's 'IVF4096,Flat'
            factory = ','.join(map(str, factory))
        if not isinstance(factory, str) or not factory:
            raise ArgumentError("factory must be a faiss factory string such as 'Flat' or "
                                f"'IVF1024,Flat', got {factory!r}.", 'factory', factory)
        for name, value in (('nprobe', nprobe), ('ef_search', ef_search),
                            ('gpu_temp_memory', gpu_temp_memory)):
            check_positive_int(value, name, allow_none=True)
        self.factory, self.nprobe, self.ef_search = factory, nprobe, ef_search
        self.device, self.gpu_temp_memory = device, gpu_temp_memory
        self.index = None
        self.capped: Optional[dict] = None
        # An IVF index whose lists are a read-only memory map (load): 'in place' (faiss's
        # IO_FLAG_MMAP_IFC: written out as it is) or 'on disk' (IO_FLAG_MMAP: copied first).
        self._mapped: Optional[str] = None

    def __len__(self) -> int:
        return 0 if self.index is None else self.index.ntotal

    def add(self, vectors: np.ndarray) -> None:
        """Add the N x D float32 rows ``vectors``; the first ones make the index (trained on
        them when its type needs it, its search parameters set, on the device)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.index is None:
            index = empty_index(self.factory, vectors.shape[1])
            train_index(index, vectors, self.factory)
            self.place(index)
        self._unmap()
        self.index.add(vectors)

    def place(self, index) -> None:
        """Hold the CPU faiss index ``index``: nprobe / efSearch set on the CPU (where a wrong
        one gets a clear error; the move to the GPU carries them), then on the device."""
        nprobe = DEFAULT_NPROBE if self.nprobe is None and has_ivf(index) else self.nprobe
        for name, value in (('nprobe', nprobe), ('efSearch', self.ef_search)):
            if value is not None:
                set_search_parameter(index, name, value)
        self.index = to_gpu(index, self.device, self.gpu_temp_memory, self.factory)
        self._mapped = None

    def to(self, device: Device) -> 'FaissIndex':
        """This index on ``device`` (its lists copied into memory first if mapped)."""
        self._unmap()
        self.device = device
        if self.index is not None:
            self.place(to_cpu(self.index))
        return self

    def search(self, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """(nq x k similarities, nq x k positions, -1 past what an approximate index found)
        of the nq x D float32 ``queries``."""
        if k > FAISS_GPU_MAX_K and on_gpu(self.index):
            raise GpuTopKError(k)
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    def save(self, path: str, dim: int = 1) -> None:
        """Write the index to ``path`` atomically (an index not made yet is written empty, of
        ``dim``-d vectors)."""
        if self._mapped != 'in place':  # faiss writes lists mapped in place as they are
            self._unmap()
        index = empty_index(self.factory, dim) if self.index is None else to_cpu(self.index)
        atomic_write(path, lambda tmp: _write_faiss(index, tmp))

    @classmethod
    def load(cls, path: str, **settings) -> 'FaissIndex':
        """The index in the faiss file ``path``, with the constructor's ``settings`` (nprobe is the
        file's unless given). On the CPU an IVF index is memory-mapped in place (IO_FLAG_MMAP_IFC,
        searched as fast as lists in memory, unlike IO_FLAG_MMAP: docs/benchmarks.md); its lists are
        copied into memory before anything is added. Other indexes, and a GPU index, are read whole.

        Raises:
            IndexIntegrityError: faiss cannot read ``path``.
        """
        faiss = import_faiss()
        self = cls(**settings)
        mapped = self.device is None or torch.device(self.device).type == 'cpu'
        try:
            # An older faiss has no in-place map: its on-disk lists then.
            in_place = getattr(faiss, 'IO_FLAG_MMAP_IFC', faiss.IO_FLAG_MMAP)
            index = faiss.read_index(path, in_place if mapped else 0)
            if mapped and not has_ivf(index):  # its vectors would be a read-only view
                index = faiss.read_index(path)
        except RuntimeError as err:  # faiss's: "Error in <C++ signature> at <source>: ..."
            raise IndexIntegrityError(path, f'{path}: not a readable faiss index (faiss: '
                                      f'{faiss_reason(err)}); it is damaged or cut short: '
                                      'rebuild the index') from None
        if self.nprobe is None and has_ivf(index):  # the saved one
            self.nprobe = faiss.extract_index_ivf(index).nprobe
        self.place(index)
        if mapped and has_ivf(index) and not on_gpu(self.index):
            self._mapped = 'in place' if hasattr(faiss, 'IO_FLAG_MMAP_IFC') else 'on disk'
        return self

    def _unmap(self) -> None:
        """Copy memory-mapped IVF lists (:meth:`load`) into memory: faiss aborts the process
        on adding to them (a read-only view of the file)."""
        if not self._mapped:
            return
        faiss = import_faiss()
        ivf = faiss.extract_index_ivf(self.index)
        mapped, lists = ivf.invlists, faiss.ArrayInvertedLists(ivf.nlist, ivf.code_size)
        for i in range(ivf.nlist):
            size = mapped.list_size(i)
            if size:
                lists.add_entries(i, size, mapped.get_ids(i), mapped.get_codes(i))
        ivf.replace_invlists(lists, True)
        lists.this.disown()  # the index owns them now
        self._mapped = None


def faiss_reason(error: RuntimeError) -> str:
    """What went wrong, from a faiss error (whose message starts with the C++ function and
    source line that raised it)."""
    text = ' '.join(str(error).split())
    for marker in ('failed: ', 'Error: '):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    return text[:300]


def _write_faiss(index, path: str) -> None:
    """``faiss.write_index``, its failures as the OSError they are (faiss raises a
    RuntimeError, "... (No space left on device)"), for atomic_write to name the file."""
    try:
        import_faiss().write_index(index, path)
    except RuntimeError as err:
        full = 'No space left on device' in str(err)
        raise OSError(errno.ENOSPC if full else errno.EIO,
                      f'faiss cannot write the index ({faiss_reason(err)})') from None
