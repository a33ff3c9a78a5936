"""Heads: turn embeddings (and labels) into loss terms."""
from .embedding_head import EmbeddingHead

__all__ = ['EmbeddingHead']
