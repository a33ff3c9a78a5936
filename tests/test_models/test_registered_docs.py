"""Every registered class of the losses, heads and miners documents what it computes and its
shapes (``__all__`` of every module: tests/test_package_all.py)."""
import inspect

import irtbox.models.heads
import irtbox.models.losses
import irtbox.models.miners
from irtbox.registry import MODELS

PACKAGES = (irtbox.models.heads, irtbox.models.losses, irtbox.models.miners)


def test_registered_classes_document_shapes():
    prefixes = tuple(p.__name__ + '.' for p in PACKAGES)
    classes = {name: cls for name, cls in MODELS.module_dict.items()
               if cls.__module__.startswith(prefixes)}
    assert {'ContrastiveLoss', 'EmbeddingHead', 'PMLLoss', 'PMLMiner'} <= set(classes)
    for name, cls in classes.items():
        doc = inspect.getdoc(cls) or ''
        assert 'Shapes' in doc, name
