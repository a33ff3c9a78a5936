"""Shipping a model: export to ONNX / TorchScript, checked against PyTorch."""
from .export import EmbeddingExport, ExportCheckError, export_model

__all__ = ['EmbeddingExport', 'ExportCheckError', 'export_model']
