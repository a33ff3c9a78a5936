from .inference import init_model

__all__ = ['init_model']
