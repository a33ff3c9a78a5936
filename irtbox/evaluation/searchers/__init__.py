"""Searchers: the one interface of nearest-neighbour search that the metrics (and
``ImageSearcher``) use, registered in ``SEARCHERS`` and named in a config as
``search=dict(type='ExactSearcher' | 'FaissSearcher', ...)``."""
from .base import NeighbourBlock, Searcher
from .build import build_searcher
from .exact import ExactSearcher
from .faiss_searcher import FaissSearcher

__all__ = ['Searcher', 'NeighbourBlock', 'ExactSearcher', 'FaissSearcher', 'build_searcher']
