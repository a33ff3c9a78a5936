"""irtbox's inverted file against exact search and against faiss's IndexIVFFlat."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from irtbox.evaluation.functional import retrieval_metrics
from irtbox.evaluation.functional.inverted_file import (InvertedFile, _RowWriter, parse_ivf,
                                                         spherical_kmeans)
from irtbox.evaluation.functional.map_at_r import count_relevant, map_at_r_from_relevance
from irtbox.evaluation.functional.recall import recall_from_relevance


def clustered(n=600, dim=16, classes=40, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    emb = rng.standard_normal((classes, dim))[labels] + rng.standard_normal((n, dim))
    return emb.astype(np.float32), labels


def int_embeddings(n, d=4, seed=0):
    # Entries in {-1, 0, 1}: inner products are small integers, so ties are exact and many.
    return np.random.default_rng(seed).integers(-1, 2, size=(n, d)).astype(np.float32)


KS = (1, 2, 5, 10, 50, 1000)


@pytest.mark.parametrize('leave_one_out', [True, False])
@pytest.mark.parametrize('chunk_size', [None, 7])
def test_every_cell_probed_is_exact_search_ties_included(leave_one_out, chunk_size):
    emb = int_embeddings(300, seed=3)
    labels = np.random.default_rng(4).integers(0, 30, 300)
    args = (emb, labels) if leave_one_out else (emb[:80], labels[:80], emb[80:], labels[80:])
    exact = retrieval_metrics(*args, ks=KS, normalize=False)
    got = retrieval_metrics(*args, ks=KS, normalize=False, index='IVF6', nprobe=6,
                            chunk_size=chunk_size)
    assert got.pop('search_recall@10') == pytest.approx(1.0)
    assert got == exact
    # A budget as large as the gallery probes every cell too.
    got = retrieval_metrics(*args, ks=KS, normalize=False, index='IVF6', candidates=10_000)
    got.pop('search_recall@10')
    assert got == exact


def faiss_ivf_metrics(query, q_labels, gallery, g_labels, centroids, nprobe, leave_one_out):
    """Metrics from faiss's IndexIVFFlat on the same cells, every candidate returned."""
    faiss = pytest.importorskip('faiss')
    dim, nlist = query.shape[1], len(centroids)
    quantizer = faiss.IndexFlatIP(dim)
    quantizer.add(centroids)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.is_trained = True
    index.add(gallery)
    index.nprobe = nprobe
    sims, idx = index.search(query, len(gallery))
    if leave_one_out:
        keep = idx != np.arange(len(query))[:, None]
        idx = np.stack([row[k][:len(gallery) - 1] for row, k in zip(idx, keep)])
    relevant = (g_labels[np.maximum(idx, 0)] == q_labels[:, None]) & (idx >= 0)
    metrics = {f'recall@{k}': v for k, v in recall_from_relevance(relevant, KS).items()}
    metrics.update(map_at_r_from_relevance(relevant,
                                           count_relevant(q_labels, g_labels, leave_one_out)))
    return metrics


@pytest.mark.parametrize('leave_one_out', [True, False])
@pytest.mark.parametrize('nprobe', [1, 3])
def test_same_metrics_as_faiss_ivf_on_the_same_cells(leave_one_out, nprobe):
    emb, labels = clustered(seed=5)
    emb = F.normalize(torch.from_numpy(emb), dim=1).numpy()
    if leave_one_out:
        query, q_labels, gallery, g_labels = emb, labels, emb, labels
        args = (emb, labels)
    else:
        query, q_labels, gallery, g_labels = emb[:150], labels[:150], emb[150:], labels[150:]
        args = (query, q_labels, gallery, g_labels)
    # retrieval_metrics trains the same seeded k-means on the same (normalised) gallery.
    centroids = spherical_kmeans(torch.from_numpy(gallery), 16).numpy()
    expected = faiss_ivf_metrics(query, q_labels, gallery, g_labels, centroids, nprobe,
                                 leave_one_out)
    got = retrieval_metrics(*args, ks=KS, index='IVF16', nprobe=nprobe, chunk_size=50)
    search_recall = got.pop('search_recall@10')
    assert got == pytest.approx(expected, abs=1e-12)
    if nprobe == 1:
        assert 0 < search_recall < 1  # one cell of 16: some true neighbours are missed


def test_topk_against_faiss_ivf_and_candidate_columns():
    faiss = pytest.importorskip('faiss')
    emb, _ = clustered(n=500, seed=6)
    gallery = F.normalize(torch.from_numpy(emb[100:]), dim=1)
    query = F.normalize(torch.from_numpy(emb[:100]), dim=1)
    inverted = InvertedFile.build(gallery, 12)
    quantizer = faiss.IndexFlatIP(16)
    quantizer.add(inverted.centroids.numpy())
    index = faiss.IndexIVFFlat(quantizer, 16, 12, faiss.METRIC_INNER_PRODUCT)
    index.is_trained = True
    index.add(gallery.numpy())
    index.nprobe = 4
    want_sims, want_ids = index.search(query.numpy(), 20)
    # A block is valid until the next one is made: use each as it comes.
    starts, tops = zip(*[(b.start, b.topk(20)) for b in inverted.search(query, 4, 33)])
    assert starts == (0, 33, 66, 99)
    sims, ids = (torch.cat(t) for t in zip(*tops))
    np.testing.assert_array_equal(ids.numpy(), want_ids)
    np.testing.assert_allclose(sims.numpy(), want_sims, rtol=1e-6)
    # Every candidate sits where columns() says, and ids() maps it back.
    block = next(inverted.search(query[33:66], 4, 100))
    rows = torch.arange(len(block.sims))
    all_ids = block.row_ids(rows)
    items = all_ids.clamp(min=0)
    columns = block.columns(rows, torch.where(all_ids >= 0, all_ids, -1))
    valid = all_ids >= 0
    assert torch.equal(columns[valid], torch.arange(all_ids.shape[1]).expand_as(all_ids)[valid])
    assert torch.equal(block.ids(rows[:, None].expand_as(columns)[valid],
                                 columns[valid].view(-1, 1)).view(-1), items[valid])
    np.testing.assert_allclose(block.sims[valid].numpy(),
                               (query[33:66][rows[:, None].expand_as(items)[valid]]
                                * gallery[items[valid]]).sum(1).numpy(), atol=1e-6)


def test_a_budget_probes_the_nearest_cells_until_it_is_reached():
    emb, _ = clustered(n=800, seed=7)
    gallery = F.normalize(torch.from_numpy(emb), dim=1)
    inverted = InvertedFile.build(gallery, 20)
    queries = gallery[:50]
    probes = inverted.probe(queries, 20, candidates=150)
    order = torch.argsort(queries @ inverted.centroids.T, dim=1, descending=True)
    for row, want in zip(probes, order):
        used = row[row >= 0]
        assert torch.equal(used, want[:len(used)])  # nearest first, no gap
        sizes = inverted.sizes[used]
        assert sizes.sum() >= 150 and sizes[:-1].sum() < 150
    capped = inverted.probe(queries, 2, candidates=10_000)
    assert capped.shape[1] == 2 and bool((capped >= 0).all())  # nprobe still caps


def test_spherical_kmeans_is_seeded_and_normalised():
    emb, _ = clustered(seed=8)
    x = torch.from_numpy(emb)
    a, b = spherical_kmeans(x, 10, seed=1), spherical_kmeans(x, 10, seed=1)
    assert torch.equal(a, b)
    assert torch.allclose(a.norm(dim=1), torch.ones(10))
    assert not torch.equal(a, spherical_kmeans(x, 10, seed=2))
    with pytest.raises(ValueError, match='nlist must be between 1 and the gallery size 600'):
        spherical_kmeans(x, 601)


def test_rows_written_without_the_strided_view_too():
    buffer = torch.full((30, ), -1.0)
    sims = torch.arange(6, dtype=torch.float32).view(2, 3)
    for strided in (True, False):
        buffer.fill_(-1)
        start = np.array([2, 20]) if strided else torch.tensor([2, 20])
        _RowWriter(buffer, strided=strided)(start, sims)
        want = torch.full((30, ), -1.0)
        want[2:5], want[20:23] = sims[0], sims[1]
        assert torch.equal(buffer, want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
def test_every_cell_probed_is_exact_on_a_gpu():
    emb, labels = clustered(seed=9)
    exact = retrieval_metrics(emb, labels, ks=KS)
    got = retrieval_metrics(emb, labels, ks=KS, index='IVF8', nprobe=8, device='cuda')
    got.pop('search_recall@10')
    assert got == pytest.approx(exact)


def test_bad_settings_are_named():
    emb, labels = clustered(n=50, seed=10)
    with pytest.raises(ValueError, match=r"index='HNSW32' needs backend='faiss'"):
        retrieval_metrics(emb, labels, index='HNSW32', nprobe=2)
    with pytest.raises(ValueError, match=r"needs nprobe \(the cells searched per query, an "
                                         r'integer in 1..8\) or candidates; got nprobe=None'):
        retrieval_metrics(emb, labels, index='IVF8')
    with pytest.raises(ValueError, match='got nprobe=9'):
        retrieval_metrics(emb, labels, index='IVF8', nprobe=9)
    with pytest.raises(ValueError, match='candidates must be a positive integer'):
        retrieval_metrics(emb, labels, index='IVF8', candidates=0)
    with pytest.raises(ValueError, match="candidates is a parameter of backend='torch'"):
        retrieval_metrics(emb, labels, backend='faiss', index='IVF8,Flat', nprobe=2,
                          candidates=10)
    with pytest.raises(ValueError, match="ef_search is a parameter of faiss's HNSW"):
        retrieval_metrics(emb, labels, index='IVF8', nprobe=2, ef_search=16)
    with pytest.raises(ValueError, match='nlist must be between 1 and the gallery size 50'):
        retrieval_metrics(emb, labels, index='IVF64', nprobe=2)
    assert parse_ivf('IVF1024,Flat', 'x') == parse_ivf('IVF1024', 'x') == 1024
