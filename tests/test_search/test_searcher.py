"""ImageSearcher on embeddings: exact and approximate search, save/load, crash safety."""
import os
import os.path as osp
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from irtbox.evaluation.functional import knn
from irtbox.search import ImageSearcher, IndexMismatchError

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def clustered(n=2000, d=32, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, d))
    x = centers[rng.integers(0, 40, n)] + 0.3 * rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_exact_search_equals_knn():
    x = clustered()
    searcher = ImageSearcher()
    searcher.add(x[:1500], ids=[f'img{i}' for i in range(1500)])
    searcher.add(x[1500:], ids=[f'img{i}' for i in range(1500, 2000)])
    sims, idx = knn(x[:50], x, 7)
    hits = searcher.search(x[:50], k=7)
    for row, (s, i) in enumerate(zip(sims, idx)):
        assert [h.id for h in hits[row]] == [f'img{j}' for j in i]
        np.testing.assert_allclose([h.score for h in hits[row]], s, atol=1e-5)
        assert [h.rank for h in hits[row]] == list(range(1, 8))
    single = searcher.search(x[3], k=2)
    assert single[0].id == 'img3' and single[0].position == 3
    assert searcher.recall_vs_exact(k=10) == 1.0


def test_unnormalised_embeddings_search_by_cosine():
    x = clustered(200)
    scaled = x * np.random.default_rng(1).uniform(0.1, 10, (200, 1)).astype(np.float32)
    searcher = ImageSearcher()
    searcher.add(scaled)
    assert [h.id for h in searcher.search(x[:5], k=3)[0]] == [
        h.id for h in ImageSearcher.search(_flat(x), x[:5], k=3)[0]]


def _flat(x):
    searcher = ImageSearcher()
    searcher.add(x)
    return searcher


def test_ivf_recall_and_training_errors():
    x = clustered()
    ivf = ImageSearcher(index='IVF32,Flat', nprobe=4)
    ivf.add(x)
    recall = ivf.recall_vs_exact(k=10, num_queries=300)
    # An independent recount: the fraction of exact neighbours that the index returns.
    _, exact = knn(x[:300], x, 10)
    got = ivf.search(x[:300], k=10)
    mine = np.mean([len({h.position for h in g} & set(e)) / 10 for g, e in zip(got, exact)])
    assert 0.5 < recall <= 1.0 and 0.5 < mine <= 1.0
    with pytest.raises(ValueError, match='needs at least 4096 vectors to train, got 2000'):
        ImageSearcher(index='IVF4096,Flat').add(x)
    with pytest.raises(ValueError, match="faiss cannot build index 'Nonsense'"):
        ImageSearcher(index='Nonsense').add(x)


def test_bad_adds_and_queries():
    searcher = ImageSearcher()
    with pytest.raises(ValueError, match='empty'):
        searcher.search(np.zeros(8, np.float32))
    searcher.add(clustered(10, 8), ids=list('abcdefghij'))
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        searcher.add(clustered(1, 8), ids=['a'])
    with pytest.raises(ValueError, match=r"repeated: \['x'\]"):
        searcher.add(clustered(2, 8), ids=['x', 'x'])
    with pytest.raises(ValueError, match='16-d embeddings, the index holds 8-d'):
        searcher.add(clustered(2, 16), ids=['y', 'z'])
    with pytest.raises(ValueError, match='k must be a positive integer'):
        searcher.search(np.zeros(8, np.float32), k=0)
    with pytest.raises(ValueError, match='needs a model'):
        searcher.search('some.jpg')
    assert len(searcher.search(np.ones(8, np.float32), k=50)) == 10  # k bounded by the size


@pytest.mark.parametrize('factory', ['Flat', 'IVF16,Flat', 'HNSW16', 'IVF8,PQ4'])
def test_save_load_same_results(factory, tmp_path):
    x = clustered(1500, 16)
    searcher = ImageSearcher(index=factory)
    searcher.add(x, ids=[f'p/{i}.jpg' for i in range(len(x))])
    before = searcher.search(x[:20], k=5)
    searcher.save(str(tmp_path / 'idx'))
    loaded = ImageSearcher.load(str(tmp_path / 'idx'))
    assert loaded.search(x[:20], k=5) == before and loaded.ids == searcher.ids
    assert loaded.factory == factory and loaded.dim == 16


def test_resave_replaces_files_and_refuses_other_folders(tmp_path):
    searcher = _flat(clustered(100, 8))
    folder = str(tmp_path / 'idx')
    searcher.save(folder)
    first = set(os.listdir(folder))
    searcher.add(clustered(5, 8, seed=3), ids=[f'new{i}' for i in range(5)])
    searcher.save(folder)
    second = set(os.listdir(folder))
    assert len(first) == len(second) == 3 and first & second == {'manifest.json'}
    assert len(ImageSearcher.load(folder)) == 105
    with pytest.raises(FileNotFoundError, match='not an irtbox index'):
        ImageSearcher.load(str(tmp_path))


def test_killed_save_leaves_the_old_index(tmp_path):
    """kill -9 at the worst moment (new data files written, manifest about to be replaced):
    the old index still loads and gives the old results."""
    folder = str(tmp_path / 'idx')
    x = clustered(300, 8)
    old = _flat(x[:200])
    old.save(folder)
    expected = old.search(x[:10], k=5)
    code = f'''
        import os, signal, numpy as np
        from irtbox.search import ImageSearcher
        searcher = ImageSearcher.load({folder!r})
        searcher.add(np.load({str(tmp_path / 'more.npy')!r}), ids=[f'n{{i}}' for i in range(100)])
        real_replace = os.replace
        def replace(src, dst):
            if dst.endswith('manifest.json'):
                os.kill(os.getpid(), signal.SIGKILL)
            real_replace(src, dst)
        os.replace = replace
        searcher.save({folder!r})
    '''
    np.save(str(tmp_path / 'more.npy'), x[200:])
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=ROOT)
    assert result.returncode == -9
    assert len(os.listdir(folder)) > 3  # the killed save did write its data files
    reloaded = ImageSearcher.load(folder)
    assert len(reloaded) == 200 and reloaded.search(x[:10], k=5) == expected
    reloaded.save(folder)  # the next save removes what the killed one left
    assert len(os.listdir(folder)) == 3 and len(ImageSearcher.load(folder)) == 200


def test_model_mismatch_is_refused(tmp_path):
    from irtbox.apis import init_model
    tiny = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
    model = init_model(tiny)
    searcher = ImageSearcher(model)
    searcher.add(clustered(20, 32))
    searcher.save(str(tmp_path / 'idx'))
    assert len(ImageSearcher.load(str(tmp_path / 'idx'), model=model)) == 20
    other = init_model(tiny)  # other random weights
    with pytest.raises(IndexMismatchError, match='model weights: index'):
        ImageSearcher.load(str(tmp_path / 'idx'), model=other)
    wide = init_model(tiny, cfg_options={'model.backbone.embed_dim': 16})
    with pytest.raises(IndexMismatchError, match='embedding dimension: index 32 vs model 16'):
        ImageSearcher.load(str(tmp_path / 'idx'), model=wide)
