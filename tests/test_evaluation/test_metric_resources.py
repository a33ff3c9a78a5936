"""The device and the CPU threads a metric's search gets on the rank that computes it."""
import numpy as np
import pytest
import torch

from irtbox.evaluation.metrics import (RetrievalMetric, RevisitedMetric, resources,
                                       retrieval_metric, revisited_metric)
from irtbox.evaluation.metrics.resources import rank_thread_count, rank_threads
from irtbox.utils.dist import resolve_device as search_device
from tests.gpu_semantics import FakeCuda


@pytest.fixture
def one_thread():
    """torch with one thread, as torchrun leaves a rank (OMP_NUM_THREADS=1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def node(monkeypatch):
    """A node of 8 cores shared by 4 ranks (torchrun's LOCAL_WORLD_SIZE)."""
    monkeypatch.setattr(resources, 'usable_cpu_count', lambda: 8)
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '4')


def fake_cuda(monkeypatch, current_device=3):
    """torch.cuda as on the rank whose own GPU is ``current_device`` of 4 (set by the
    distributed set-up), not GPU 0. (Build metrics before: MMEngine's logger would ask the
    fake for its GPUs.)"""
    FakeCuda(monkeypatch, count=4, current=current_device)


def record(monkeypatch, module, name, result):
    """Replace the search ``module.name`` by one that returns ``result`` and records the
    device it was given (itself or its searcher's) and torch's thread count, per call."""
    calls = []

    def recording(*args, **kwargs):
        if 'searcher' in kwargs:
            device = kwargs['searcher'].device
        else:
            device = kwargs['device'] if 'device' in kwargs else args[-1]
        calls.append((device, torch.get_num_threads()))
        return result
    monkeypatch.setattr(module, name, recording)
    return calls


def retrieval_metric_on(samples=20, **kwargs):
    """A RetrievalMetric that processed ``samples`` samples of 4 labels, with small integer
    embeddings (their inner products are exact on any device)."""
    rng = np.random.default_rng(0)
    metric = RetrievalMetric(**kwargs)
    metric.process(None, [dict(embedding=rng.integers(-2, 3, size=4).astype(np.float32),
                               gt_label=i % 4, sample_idx=i) for i in range(samples)])
    return metric


def test_search_device_is_this_ranks_own_gpu(monkeypatch):
    fake_cuda(monkeypatch)
    assert search_device() == torch.device('cuda', 3)
    assert search_device('cuda') == torch.device('cuda', 3)  # not faiss's GPU 0
    assert search_device('cuda:1') == torch.device('cuda', 1)
    assert search_device('cpu') == torch.device('cpu')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert search_device() == torch.device('cpu')


@pytest.mark.parametrize('cpus, local_world_size, threads', [
    (8, '4', 2), (8, None, 8), (2, '4', 1), (1, None, 1)])
def test_rank_thread_count_shares_the_node(monkeypatch, cpus, local_world_size, threads):
    monkeypatch.setattr(resources, 'usable_cpu_count', lambda: cpus)
    for key in ('SLURM_NTASKS_PER_NODE', 'SLURM_TASKS_PER_NODE'):
        monkeypatch.delenv(key, raising=False)
    if local_world_size is None:
        monkeypatch.delenv('LOCAL_WORLD_SIZE', raising=False)
    else:
        monkeypatch.setenv('LOCAL_WORLD_SIZE', local_world_size)
    assert rank_thread_count() == threads


def test_rank_threads_restores_the_thread_count(one_thread, node):
    with pytest.raises(RuntimeError):
        with rank_threads() as threads:
            assert threads == torch.get_num_threads() == 2
            raise RuntimeError
    assert torch.get_num_threads() == 1


def test_retrieval_metric_searches_on_this_rank(monkeypatch, one_thread, node):
    metric = retrieval_metric_on(map_at_all=True)
    fake_cuda(monkeypatch)
    searched = record(monkeypatch, retrieval_metric, 'retrieval_metrics', {})
    ranked = record(monkeypatch, retrieval_metric, 'search_average_precision', np.zeros(20))
    metric.compute_metrics(metric.results)
    # This rank's GPU, and the threads of its share of the node: 8 cores / 4 ranks.
    assert searched == ranked == [(torch.device('cuda', 3), 2)]
    assert torch.get_num_threads() == 1


def test_faiss_keeps_the_cpu_unless_told(monkeypatch):
    metrics = [retrieval_metric_on(search=dict(type='FaissSearcher', device=device))
               for device in (None, 'cuda')]
    fake_cuda(monkeypatch)
    searched = record(monkeypatch, retrieval_metric, 'retrieval_metrics', {})
    for metric in metrics:
        metric.compute_metrics(metric.results)
    assert [device for device, _ in searched] == [None, torch.device('cuda', 3)]


def test_revisited_metric_searches_on_this_rank(monkeypatch, one_thread, node):
    rng = np.random.default_rng(0)
    metric = RevisitedMetric(protocols=('easy', ))
    metric.dataset_meta = dict(gnd=[dict(easy=[0], hard=[1], junk=[]),
                                    dict(easy=[2], hard=[], junk=[3])])
    metric.process(None, [dict(embedding=rng.normal(size=4).astype(np.float32), sample_idx=i,
                               is_query=i < 2) for i in range(8)])
    fake_cuda(monkeypatch, current_device=1)
    searched = record(monkeypatch, revisited_metric, 'revisited_metrics',
                      dict(easy=(0.5, np.zeros(2), np.zeros(3), None)))
    metric.compute_metrics(metric.results)
    assert searched == [(torch.device('cuda', 1), 2)]
    assert torch.get_num_threads() == 1


@pytest.mark.gpu
def test_metrics_search_on_this_gpu_as_on_the_cpu():
    assert search_device() == torch.device('cuda', torch.cuda.current_device())
    # Without normalisation the inner products are exact, so the rankings are the same.
    on_gpu, on_cpu = (retrieval_metric_on(200, map_at_all=True,
                                          search=dict(type='ExactSearcher', device=device),
                                          normalize=False)
                      for device in (None, 'cpu'))
    assert on_gpu.compute_metrics(on_gpu.results) == on_cpu.compute_metrics(on_cpu.results)
