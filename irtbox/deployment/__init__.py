"""Shipping a model: export to ONNX / TorchScript, checked against PyTorch."""
from .export import EmbeddingExport, ExportCheckError, export_model, model_sees_bgr

__all__ = ['EmbeddingExport', 'ExportCheckError', 'export_model', 'model_sees_bgr']
