"""irtbox: an MMEngine-based toolbox for training and evaluating image-retrieval models."""
__version__ = '0.1.0'

__all__ = ['__version__']
