"""A 2-D map of the embedding space (PCA, t-SNE or UMAP), coloured by class."""
from typing import Optional, Sequence

import numpy as np

from irtbox.utils.extras import require_extra
from irtbox.utils.fileio import atomic_write

from .html_browser import label_name

__all__ = ['METHODS', 'embed_2d', 'plot_embedding_map']

METHODS = ('pca', 'tsne', 'umap')
LEGEND_MAX_CLASSES = 20  # more classes than this: a legend would hide the map


def embed_2d(embeddings: np.ndarray, method: str = 'tsne', seed: int = 0) -> np.ndarray:
    """(n, 2) coordinates of n x D ``embeddings`` (rows L2-normalised first, as the search
    compares them by cosine).

    'pca': the two leading principal components (numpy SVD); 'tsne': scikit-learn's
    t-SNE (perplexity min(30, (n - 1) / 3)); 'umap': umap-learn, the ``umap`` extra
    (a :class:`~irtbox.utils.extras.MissingExtraError` naming ``pip install "irtbox[umap]"``
    when it is absent).
    """
    if method not in METHODS:
        raise ValueError(f'embed_2d: method must be one of {METHODS}, got {method!r}.')
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2 or len(x) < 3:
        raise ValueError(f'embed_2d: expected an n x D array with n >= 3, got shape {x.shape}.')
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    if method == 'pca':
        centred = x - x.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        out = centred @ vt[:2].T
        return np.pad(out, ((0, 0), (0, 2 - out.shape[1])))  # D = 1: a flat second axis
    if method == 'tsne':
        from sklearn.manifold import TSNE
        perplexity = min(30.0, (len(x) - 1) / 3)
        return TSNE(n_components=2, perplexity=perplexity, init='pca', random_state=seed,
                    metric='cosine').fit_transform(x)
    require_extra(['umap'], 'umap', "method='umap' (or use 'tsne' / 'pca')")
    import umap
    return umap.UMAP(n_components=2, random_state=seed, metric='cosine').fit_transform(x)


def plot_embedding_map(points: np.ndarray, labels: Optional[np.ndarray], out: str,
                       class_names: Optional[Sequence[str]] = None, title: str = '',
                       thumbnails: Sequence = (), thumb_zoom: float = 0.3):
    """Scatter ``points`` (n x 2) coloured by ``labels`` into the image file ``out``.

    A legend appears when there are at most ``LEGEND_MAX_CLASSES`` classes.
    ``thumbnails``: ``(index, image array)`` pairs drawn at those points. Written
    atomically (a file beside ``out``, then renamed). Returns the matplotlib ``Figure``.
    """
    require_extra(['matplotlib'], 'plots', 'the embedding map')
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.offsetbox import AnnotationBbox, OffsetImage
    # A Figure of its own (no pyplot): nothing global changes in the caller's matplotlib.
    fig = Figure(figsize=(8, 8), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if labels is None:
        ax.scatter(points[:, 0], points[:, 1], s=6, c='tab:blue')
    else:
        classes = np.unique(labels)
        for colour, c in zip(_colours(len(classes)), classes):
            mask = labels == c
            ax.scatter(points[mask, 0], points[mask, 1], s=6, color=colour,
                       label=label_name(c.item(), class_names))
        if len(classes) <= LEGEND_MAX_CLASSES:
            ax.legend(markerscale=3, fontsize=8, loc='best', title='class')
    for index, image in thumbnails:
        ax.add_artist(AnnotationBbox(OffsetImage(image, zoom=thumb_zoom), points[index],
                                     frameon=True, pad=0.1))
    ax.set(title=title, xticks=[], yticks=[])
    fig.tight_layout()
    atomic_write(out, fig.savefig)
    return fig


def _colours(n: int) -> list:
    """n distinct colours: tab20's for up to 20 classes, else evenly spaced on a spectrum."""
    import matplotlib
    if n <= 20:
        return [matplotlib.colormaps['tab20'](i) for i in range(n)]
    return [matplotlib.colormaps['nipy_spectral'](x) for x in np.linspace(0, 0.95, n)]
