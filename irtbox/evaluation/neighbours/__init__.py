"""Nearest neighbours by inner product: the one searcher interface that the metrics use
(``Searcher``, registered in ``SEARCHERS`` and named in a config as
``search=dict(type='ExactSearcher' | 'FaissSearcher', ...)``) and the one faiss index
(:class:`~irtbox.evaluation.neighbours.faiss_index.FaissIndex`), and the one ``Index`` of a
collection (rows, ids, a FaissIndex, re-ranking, save / load, recall@k) that
``irtbox.search.ImageSearcher`` searches."""
from .base import NeighbourBlock, Searcher
from .build import build_searcher
from .exact import ExactSearcher
from .faiss_index import FaissIndex
from .faiss_searcher import FaissSearcher
from .index import Index

__all__ = ['Searcher', 'NeighbourBlock', 'ExactSearcher', 'FaissSearcher', 'FaissIndex',
           'Index', 'build_searcher']
