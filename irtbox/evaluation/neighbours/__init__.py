"""Nearest neighbours by inner product: the one searcher interface that the metrics use
(``Searcher``, registered in ``SEARCHERS`` and named in a config as
``search=dict(type='ExactSearcher' | 'FaissSearcher', ...)``) and the one faiss index
(:class:`~irtbox.evaluation.neighbours.faiss_index.FaissIndex`) that ``FaissSearcher`` and
``irtbox.search.ImageSearcher`` keep their vectors in."""
from .base import NeighbourBlock, Searcher
from .build import build_searcher
from .exact import ExactSearcher
from .faiss_index import FaissIndex
from .faiss_searcher import FaissSearcher

__all__ = ['Searcher', 'NeighbourBlock', 'ExactSearcher', 'FaissSearcher', 'FaissIndex',
           'build_searcher']
