"""faiss indexes on a real GPU: nprobe, wrapped indexes, index types faiss-gpu lacks, long PQ
codes, the k limit, CUDA tensors, the current device. Skipped without CUDA and faiss-gpu."""
import numpy as np
import pytest
import torch

from irtbox.evaluation.neighbours.faiss_index import on_gpu, set_search_parameter, to_cpu
from irtbox.search import ImageSearcher

faiss = pytest.importorskip('faiss')

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or not hasattr(faiss, 'GpuIndex')
                       or faiss.get_num_gpus() == 0, reason='needs CUDA and faiss-gpu')
]


def unit_vectors(n, d=32, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def gpu_ivf(index):
    """The GPU IVF index of a searcher's index, itself or inside an IndexPreTransform."""
    index = faiss.downcast_index(index)
    return faiss.downcast_index(index.index) if hasattr(index, 'index') else index


@pytest.mark.parametrize('factory', ['IVF16,Flat', 'PCA16,IVF16,Flat'])
def test_nprobe_reaches_a_gpu_ivf_index(factory):
    searcher = ImageSearcher(factory=factory, device='cuda', nprobe=5)
    searcher.add(unit_vectors(2000))
    assert on_gpu(searcher.index) and gpu_ivf(searcher.index).nprobe == 5
    set_search_parameter(searcher.index, 'nprobe', 3)
    assert gpu_ivf(searcher.index).nprobe == 3


def test_searching_every_list_of_a_gpu_ivf_index_finds_the_exact_neighbours():
    searcher = ImageSearcher(factory='IVF16,Flat', device='cuda', nprobe=16)
    searcher.add(unit_vectors(2000))
    # With nprobe left at 1, about a third of them.
    assert searcher.recall_vs_exact(k=10, num_queries=200) > 0.99


def test_a_wrapped_gpu_index_is_saved_from_a_cpu_copy(tmp_path):
    x = unit_vectors(2000)
    searcher = ImageSearcher(factory='PCA16,IVF16,Flat', device='cuda')
    searcher.add(x)
    assert type(searcher.index).__name__ == 'IndexPreTransform' and on_gpu(searcher.index)
    assert not on_gpu(to_cpu(searcher.index))
    searcher.save(str(tmp_path / 'idx'))
    loaded = ImageSearcher.load(str(tmp_path / 'idx'), device='cpu')
    assert not on_gpu(loaded.index)
    assert [[h.position for h in hits] for hits in loaded.search(x[:10], k=5)] == \
        [[h.position for h in hits] for hits in searcher.search(x[:10], k=5)]


def test_hnsw_stays_on_the_cpu_with_a_warning():
    x = unit_vectors(500)
    searcher = ImageSearcher(factory='HNSW32', device='cuda')
    with pytest.warns(UserWarning, match='cannot put index HNSW32 on the GPU'):
        searcher.add(x)
    assert not on_gpu(searcher.index) and searcher.search(x[4], k=1)[0].position == 4


def test_ivf_pq_with_56_byte_codes_moves_to_the_gpu():
    x = unit_vectors(3000, d=112)
    searcher = ImageSearcher(factory='IVF16,PQ56', device='cuda', nprobe=16)
    searcher.add(x)
    assert on_gpu(searcher.index) and searcher.recall_vs_exact(k=10, num_queries=200) > 0.5


def test_k_past_the_gpu_limit_is_a_clear_error():
    x = unit_vectors(2100, d=8)
    searcher = ImageSearcher(device='cuda')
    searcher.add(x)
    assert on_gpu(searcher.index) and len(searcher.search(x[0], k=2048)) == 2048
    with pytest.raises(ValueError, match='at most 2048 hits per query'):
        searcher.search(x[0], k=2049)


def test_cuda_tensors_are_added_and_searched():
    x = torch.from_numpy(unit_vectors(300)).cuda()
    searcher = ImageSearcher(device='cuda')
    searcher.add(x.half())
    assert [hits[0].position for hits in searcher.search(x[:3], k=1)] == [0, 1, 2]


def test_the_index_is_on_the_current_cuda_device():
    searcher = ImageSearcher(device='cuda', gpu_temp_memory=64 << 20)
    searcher.add(unit_vectors(100))
    assert faiss.downcast_index(searcher.index).getDevice() == torch.cuda.current_device()
