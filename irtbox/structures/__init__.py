from .data_sample import DataSample
from .embeddings_file import EmbeddingSet, embedding_set_names, load_embeddings, save_embeddings
from .vit_features import ViTFeatures

__all__ = ['DataSample', 'ViTFeatures', 'EmbeddingSet', 'save_embeddings', 'load_embeddings',
           'embedding_set_names']
