"""The faiss GPU helpers of the searchers, on the CPU: a stand-in for faiss-gpu records what
they ask of it (the real GPU path is tests/test_search/test_faiss_gpu.py)."""
import sys
import types

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import knn, retrieval_metrics
from irtbox.evaluation.neighbours import FaissSearcher
from irtbox.evaluation.neighbours import faiss_index
from irtbox.evaluation.neighbours.faiss_index import (float16_lookup_tables, on_gpu,
                                                     set_search_parameter, to_cpu, to_gpu)

faiss = pytest.importorskip('faiss')


class FakeGpu:
    """faiss-gpu's entry points on top of faiss-cpu: moving an index records the device, the
    cloner options and the scratch memory, and returns the CPU index (or raises, like
    faiss-gpu for an index type it has no GPU version of)."""

    def __init__(self, monkeypatch, refuse=None):
        self.moves, self.temp_memory, self.refuse = [], [], refuse
        fake = self

        class Resources:

            def setTempMemory(self, size):
                fake.temp_memory.append(size)

        class ClonerOptions:
            useFloat16 = False

        for name, value in (('StandardGpuResources', Resources),
                            ('GpuClonerOptions', ClonerOptions),
                            ('get_num_gpus', lambda: 2),
                            ('index_cpu_to_gpu', self.index_cpu_to_gpu)):
            monkeypatch.setattr(faiss, name, value, raising=False)
        monkeypatch.setattr(torch.cuda, 'current_device', lambda: 1)

    def index_cpu_to_gpu(self, resources, device, index, options=None):
        if self.refuse:
            raise RuntimeError(self.refuse)
        self.moves.append((device, getattr(options, 'useFloat16', False)))
        return index


def test_to_gpu_uses_the_current_device_and_the_given_temp_memory(monkeypatch):
    gpu = FakeGpu(monkeypatch)
    index = faiss.IndexFlatIP(4)
    to_gpu(index, 'cuda')
    to_gpu(index, torch.device('cuda', 0), temp_memory=1 << 20)
    assert to_gpu(index, 'cpu') is index and to_gpu(index, None) is index
    assert gpu.moves == [(1, False), (0, False)] and gpu.temp_memory == [1 << 20]


def test_faiss_knn_on_a_bare_cuda_device_uses_the_current_one(monkeypatch):
    gpu = FakeGpu(monkeypatch)
    emb = np.random.default_rng(0).standard_normal((20, 4)).astype(np.float32)
    _, idx = knn(emb, emb, 3, searcher=FaissSearcher(device='cuda'))
    assert gpu.moves == [(1, False)]
    np.testing.assert_array_equal(idx, knn(emb, emb, 3)[1])


@pytest.mark.slow
def test_an_approximate_index_moves_to_the_gpu_and_refuses_k_past_its_limit(monkeypatch):
    """Any factory string, nprobe set before the move; past faiss-gpu's k the one GPU rule
    of every faiss search (FaissIndex.search): a GpuTopKError naming k."""
    gpu = FakeGpu(monkeypatch)
    emb = np.random.default_rng(0).standard_normal((2200, 8)).astype(np.float32)
    searcher = FaissSearcher(factory='IVF4,Flat', nprobe=4, device='cuda:0')
    _, idx = knn(emb, emb, 10, exclude_self=True, searcher=searcher)
    assert gpu.moves == [(0, False)]
    np.testing.assert_array_equal(idx, knn(emb, emb, 10, exclude_self=True)[1])
    monkeypatch.setattr(faiss_index, 'on_gpu', lambda index: True)  # the fake keeps CPU ones
    with pytest.raises(faiss_index.GpuTopKError, match=r"at most 2048 hits per query, got "
                                                       r"k=2100; .* \(device='cpu'\)") as info:
        knn(emb, emb, 2100, searcher=searcher)
    assert info.value.k == 2100


def test_an_index_faiss_gpu_lacks_stays_on_the_cpu_with_one_warning(monkeypatch):
    FakeGpu(monkeypatch, refuse='This index type is not implemented on GPU.')
    index = faiss.index_factory(8, 'HNSW16', faiss.METRIC_INNER_PRODUCT)
    with pytest.warns(UserWarning, match='cannot put index HNSW16 on the GPU') as caught:
        assert to_gpu(index, 'cuda:0', name='HNSW16') is index
    assert len(caught) == 1 and 'not implemented on GPU' in str(caught[0].message)
    with pytest.warns(UserWarning, match='cannot put index IndexHNSWFlat on the GPU'):
        to_gpu(index, 'cuda:0')


@pytest.mark.parametrize('factory, dim, expected', [
    ('IVF4,PQ56', 112, True), ('IVF4,PQ64', 64, True), ('OPQ56,IVF4,PQ56', 112, True),
    ('IVF4,PQ48', 96, False), ('IVF4,PQ56x4', 112, False), ('IVF4,Flat', 112, False),
    ('PQ56', 112, False), ('HNSW16', 112, False), ('Flat', 112, False)])
def test_float16_lookup_tables_for_pq_codes_of_56_bytes_or_more(factory, dim, expected):
    assert float16_lookup_tables(
        faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)) is expected


def test_to_gpu_asks_for_float16_tables_for_long_pq_codes(monkeypatch):
    gpu = FakeGpu(monkeypatch)
    for factory in ('IVF4,PQ56', 'IVF4,PQ28'):
        to_gpu(faiss.index_factory(112, factory, faiss.METRIC_INNER_PRODUCT), 'cuda:0')
    assert gpu.moves == [(0, True), (0, False)]


def test_set_search_parameter_reaches_the_index_inside_wrappers():
    ivf = faiss.index_factory(16, 'PCA8,IVF4,Flat', faiss.METRIC_INNER_PRODUCT)
    set_search_parameter(ivf, 'nprobe', 3)
    assert faiss.extract_index_ivf(ivf).nprobe == 3
    hnsw = faiss.index_factory(16, 'HNSW8', faiss.METRIC_INNER_PRODUCT)
    set_search_parameter(hnsw, 'efSearch', np.int64(7))
    assert faiss.downcast_index(hnsw).hnsw.efSearch == 7


def test_set_search_parameter_refuses_what_the_index_lacks():
    hnsw = faiss.index_factory(16, 'HNSW8', faiss.METRIC_INNER_PRODUCT)
    with pytest.raises(ValueError, match='IndexHNSWFlat has no search parameter nprobe=4'):
        set_search_parameter(hnsw, 'nprobe', 4)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match='must be a positive integer'):
            set_search_parameter(hnsw, 'efSearch', bad)


def test_set_search_parameter_uses_the_gpu_parameter_space(monkeypatch):
    """faiss's ParameterSpace fails on a GPU IVF index; GpuParameterSpace sets it."""
    calls = []

    class CpuSpace:

        def set_index_parameter(self, index, name, value):
            raise RuntimeError('could not set parameter nprobe')

    class GpuSpace:

        def set_index_parameter(self, index, name, value):
            calls.append((index, name, value))

    monkeypatch.setattr(faiss, 'ParameterSpace', CpuSpace)
    monkeypatch.setattr(faiss, 'GpuParameterSpace', GpuSpace, raising=False)
    set_search_parameter('gpu index', 'nprobe', 32)
    assert calls == [('gpu index', 'nprobe', 32)]


def test_nprobe_past_the_gpu_limit_is_refused_on_a_gpu_index(monkeypatch):
    ivf = faiss.index_factory(16, 'IVF4,Flat', faiss.METRIC_INNER_PRODUCT)
    set_search_parameter(ivf, 'nprobe', 4096)  # on the CPU any nprobe is fine
    monkeypatch.setattr(faiss_index, 'on_gpu', lambda index: True)
    with pytest.raises(ValueError, match='probes at most 2048 IVF lists, got nprobe=4096'):
        set_search_parameter(ivf, 'nprobe', 4096)


class GpuIndex:
    """faiss-gpu's base class of its GPU indexes."""


class PreTransform:
    """A CPU wrapper: its class name says nothing of the GPU index inside."""

    def __init__(self, index):
        self.index = index


def test_to_cpu_finds_a_gpu_index_inside_a_wrapper(monkeypatch):
    copies = []
    monkeypatch.setitem(sys.modules, 'faiss', types.SimpleNamespace(
        GpuIndex=GpuIndex, downcast_index=lambda index: index,
        index_gpu_to_cpu=lambda index: copies.append(index) or 'a CPU copy'))
    wrapped, cpu = PreTransform(GpuIndex()), PreTransform(object())
    assert on_gpu(wrapped) and not on_gpu(cpu)
    assert to_cpu(wrapped) == 'a CPU copy' and copies == [wrapped]
    assert to_cpu(cpu) is cpu and copies == [wrapped]


def test_approximate_evaluation_refuses_nprobe_of_an_index_without_lists():
    emb = np.random.default_rng(0).standard_normal((60, 8)).astype(np.float32)
    labels = np.arange(60) % 6
    with pytest.raises(ValueError, match='no search parameter nprobe'):
        retrieval_metrics(emb, labels, searcher=FaissSearcher(factory='HNSW8', nprobe=4))


def test_a_faiss_index_moves_to_a_device_and_back_keeping_its_rows_and_nprobe(monkeypatch):
    gpu = FakeGpu(monkeypatch)
    x = np.random.default_rng(0).standard_normal((400, 8)).astype(np.float32)
    index = faiss_index.FaissIndex('IVF4,Flat', nprobe=3)
    index.add(x)
    expected = index.search(x[:5], 4)
    index.to('cuda:0')
    assert gpu.moves == [(0, False)] and index.device == 'cuda:0' and len(index) == 400
    index.to('cpu')
    assert gpu.moves == [(0, False)] and faiss.extract_index_ivf(index.index).nprobe == 3
    np.testing.assert_array_equal(index.search(x[:5], 4)[1], expected[1])
