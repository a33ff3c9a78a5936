"""ImageSearcher's use of faiss beyond the plain CPU index, on the CPU: nprobe, the GPU
fallback, faiss-gpu's k limit, torch tensors (the real GPU path: test_faiss_gpu.py)."""
import json
import os.path as osp

import numpy as np
import pytest
import torch

from irtbox.search import ImageSearcher
from irtbox.evaluation.neighbours import faiss_index

faiss = pytest.importorskip('faiss')


def unit_vectors(n, d=16, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def nprobe_of(searcher):
    return faiss.extract_index_ivf(searcher.index).nprobe


def test_nprobe_is_set_on_the_index_and_kept_by_save_load(tmp_path):
    x = unit_vectors(400)
    given = ImageSearcher(factory='PCA8,IVF8,Flat', nprobe=5)
    given.add(x)
    default = ImageSearcher(factory='IVF8,Flat')
    default.add(x)
    assert nprobe_of(given) == 5 and nprobe_of(default) == 16
    given.save(str(tmp_path / 'given'))
    default.save(str(tmp_path / 'default'))
    assert nprobe_of(ImageSearcher.load(str(tmp_path / 'given'))) == 5
    assert nprobe_of(ImageSearcher.load(str(tmp_path / 'default'))) == 16
    assert nprobe_of(ImageSearcher.load(str(tmp_path / 'given'), nprobe=7)) == 7


def test_nprobe_of_an_index_without_lists_is_refused(tmp_path):
    x = unit_vectors(200)
    searcher = ImageSearcher(factory='HNSW16', nprobe=8)
    with pytest.raises(ValueError, match='no search parameter nprobe=8'):
        searcher.add(x)
    assert searcher.index is None and len(searcher) == 0
    flat = ImageSearcher()  # no nprobe asked: none set
    flat.add(x)
    flat.save(str(tmp_path / 'flat'))
    with pytest.raises(ValueError, match='no search parameter nprobe=4'):
        ImageSearcher.load(str(tmp_path / 'flat'), nprobe=4)


def test_a_manifest_recording_nprobe_for_a_flat_index_still_loads(tmp_path):
    """Manifests written while nprobe defaulted to 16 record it for every index type."""
    folder = str(tmp_path / 'idx')
    x = unit_vectors(50)
    searcher = ImageSearcher()
    searcher.add(x)
    searcher.save(folder)
    with open(osp.join(folder, 'manifest.json')) as f:
        manifest = json.load(f)
    manifest['nprobe'] = 16
    with open(osp.join(folder, 'manifest.json'), 'w') as f:
        json.dump(manifest, f)
    assert ImageSearcher.load(folder).search(x[:3], k=2) == searcher.search(x[:3], k=2)


def test_hnsw_on_cuda_stays_on_the_cpu_with_one_warning(monkeypatch):
    """faiss-gpu (>= 1.8) throws for HNSW: the index stays on the CPU and works."""

    def index_cpu_to_gpu(*args):
        raise RuntimeError('This index type is not implemented on GPU.')

    for name, value in (('StandardGpuResources', object), ('GpuClonerOptions', type('O', (), {})),
                        ('get_num_gpus', lambda: 1), ('index_cpu_to_gpu', index_cpu_to_gpu)):
        monkeypatch.setattr(faiss, name, value, raising=False)
    x = unit_vectors(300)
    searcher = ImageSearcher(factory='HNSW16', device='cuda:0')
    with pytest.warns(UserWarning, match='cannot put index HNSW16 on the GPU') as caught:
        searcher.add(x[:200])
        searcher.add(x[200:])
    assert len(caught) == 1
    assert searcher.search(x[7], k=1)[0].position == 7


def test_k_past_the_gpu_limit_is_a_clear_error(monkeypatch):
    searcher = ImageSearcher()
    searcher.add(unit_vectors(2100, 4))
    query = unit_vectors(1, 4, seed=1)[0]
    assert len(searcher.search(query, k=2100)) == 2100  # on the CPU any k works
    monkeypatch.setattr(faiss_index, 'on_gpu', lambda index: True)
    assert len(searcher.search(query, k=2048)) == 2048
    with pytest.raises(ValueError, match=r"at most 2048 hits per query, got k=2049.*"
                                         r"device='cpu'"):
        searcher.search(query, k=2049)


def test_torch_tensors_with_autograd_or_half_precision_are_accepted():
    x = unit_vectors(100)
    reference = ImageSearcher()
    reference.add(x)
    searcher = ImageSearcher()
    searcher.add(torch.from_numpy(x).requires_grad_())
    queries = torch.from_numpy(x[:5]).to(torch.bfloat16)
    assert [[h.id for h in hits] for hits in searcher.search(queries, k=3)] == \
        [[h.id for h in hits] for hits in reference.search(queries.float().numpy(), k=3)]
    assert searcher.search(torch.from_numpy(x[9]).requires_grad_(), k=1)[0].id == '9'
