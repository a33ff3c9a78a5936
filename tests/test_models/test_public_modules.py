"""Every module of the losses, heads and miners declares its public names, and every
registered class documents what it computes and its shapes."""
import importlib
import inspect
import pkgutil

import pytest

import irtbox.models.heads
import irtbox.models.losses
import irtbox.models.miners
from irtbox.registry import MODELS

PACKAGES = (irtbox.models.heads, irtbox.models.losses, irtbox.models.miners)


def modules():
    for package in PACKAGES:
        yield package
        for info in pkgutil.iter_modules(package.__path__):
            yield importlib.import_module(f'{package.__name__}.{info.name}')


@pytest.mark.parametrize('module', list(modules()), ids=lambda m: m.__name__)
def test_all_is_declared_and_defined(module):
    assert isinstance(getattr(module, '__all__', None), list), module.__name__
    for name in module.__all__:
        assert hasattr(module, name), (module.__name__, name)


def test_registered_classes_document_shapes():
    prefixes = tuple(p.__name__ + '.' for p in PACKAGES)
    classes = {name: cls for name, cls in MODELS.module_dict.items()
               if cls.__module__.startswith(prefixes)}
    assert {'ContrastiveLoss', 'EmbeddingHead', 'PMLLoss', 'PMLMiner'} <= set(classes)
    for name, cls in classes.items():
        doc = inspect.getdoc(cls) or ''
        assert 'Shapes' in doc, name
