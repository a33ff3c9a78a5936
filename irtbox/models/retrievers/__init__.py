from .image_retriever import ImageRetriever

__all__ = ['ImageRetriever']
