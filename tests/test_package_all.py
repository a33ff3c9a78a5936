"""Every module of the package declares its public names in ``__all__``, and each exists."""
import importlib
import pkgutil

import pytest

import irtbox


def module_names():
    yield 'irtbox'
    for info in pkgutil.walk_packages(irtbox.__path__, 'irtbox.'):
        yield info.name


@pytest.mark.parametrize('name', sorted(module_names()))
def test_all_is_declared_and_defined(name):
    module = importlib.import_module(name)
    names = getattr(module, '__all__', None)
    assert isinstance(names, (list, tuple)), f'{name} declares no __all__'
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f'{name}.__all__ names what it does not define: {missing}'
    assert len(set(names)) == len(names), f'{name}.__all__ repeats a name'
