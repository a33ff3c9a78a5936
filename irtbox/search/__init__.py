"""Search your own images: embed a collection, index it with faiss, query it, serve it."""
from irtbox.apis.identity import model_identity

from .build import IndexBuild, build_index
from .searcher import (CheckpointMovedError, ImageSearcher, IndexFileChangedError,
                       IndexFolderBusy, IndexIntegrityError, IndexMismatchError, SearchHit,
                       UntrustedConfigError, load_index_model)

__all__ = ['ImageSearcher', 'IndexMismatchError', 'IndexIntegrityError', 'IndexFolderBusy',
           'IndexFileChangedError', 'CheckpointMovedError', 'UntrustedConfigError', 'SearchHit',
           'load_index_model', 'model_identity', 'IndexBuild', 'build_index']
