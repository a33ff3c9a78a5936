"""2-D embedding maps: PCA against scikit-learn, t-SNE shape and seed, UMAP absent, the PNG."""
import sys

import numpy as np
import pytest
from PIL import Image

from irtbox.visualization import embed_2d, plot_embedding_map


def normalized(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.slow
def test_pca_matches_scikit_learn(tiny_result):
    from sklearn.decomposition import PCA
    emb = tiny_result['embeddings']
    want = PCA(n_components=2).fit_transform(normalized(emb.astype(np.float64)))
    got = embed_2d(emb, 'pca')
    # Principal axes are defined up to sign.
    np.testing.assert_allclose(np.abs(got), np.abs(want), atol=1e-6)


@pytest.mark.slow
def test_tsne_is_reproducible(tiny_result):
    a = embed_2d(tiny_result['embeddings'], 'tsne', seed=1)
    assert a.shape == (16, 2) and np.isfinite(a).all()
    np.testing.assert_allclose(a, embed_2d(tiny_result['embeddings'], 'tsne', seed=1))


def test_umap_absent_names_the_package(tiny_result, monkeypatch):
    monkeypatch.setitem(sys.modules, 'umap', None)  # import umap -> ImportError
    with pytest.raises(ImportError, match=r'needs umap.*pip install "irtbox\[umap\]"'):
        embed_2d(tiny_result['embeddings'], 'umap')


def test_bad_input():
    with pytest.raises(ValueError, match="method must be one of"):
        embed_2d(np.ones((5, 2)), 'mds')
    with pytest.raises(ValueError, match='n >= 3'):
        embed_2d(np.ones((2, 4)), 'pca')


@pytest.mark.slow
def test_map_png_with_legend_and_thumbnails(tiny_result, tmp_path):
    points = embed_2d(tiny_result['embeddings'], 'pca')
    out = tmp_path / 'map.png'
    thumb = np.full((16, 16, 3), 200, dtype=np.uint8)
    fig = plot_embedding_map(points, tiny_result['labels'], str(out),
                             class_names=tiny_result['class_names'], thumbnails=[(0, thumb)])
    with Image.open(out) as img:
        assert img.size == (800, 800)
    assert not list(tmp_path.glob('*.tmp*'))  # written atomically, nothing left beside it
    legend = fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ['ant', 'bee', 'cat', 'dog']


@pytest.mark.slow
def test_no_legend_for_many_classes(tmp_path):
    rng = np.random.default_rng(0)
    fig = plot_embedding_map(rng.normal(size=(60, 2)), np.arange(60) % 30,
                             str(tmp_path / 'map.png'))
    assert fig.axes[0].get_legend() is None
