"""The one adapter to PyTorch Metric Learning (PML) classes, shared by
:class:`~irtbox.models.losses.PMLLoss` and :class:`~irtbox.models.miners.PMLMiner`:
a lazy import with an error that names the package, the lookup of a class by
name (checked against its PML base class) and its construction with errors
that name the arguments (the irtbox module that calls them adds its own name).

PML is an optional dependency: nothing is imported until one of these is called.
"""
import importlib
import inspect

from irtbox.utils.errors import ArgumentError

__all__ = ['pml_class', 'build_pml', 'init_takes']


def pml_class(module: str, name: str, base: str) -> type:
    """The class ``name`` of ``pytorch_metric_learning.<module>``, checked to
    derive from its ``base``; a ValueError listing the valid names otherwise, an
    ImportError naming the package to install when PML is missing."""
    try:
        importlib.import_module('pytorch_metric_learning')
    except ImportError as error:
        raise ImportError('PyTorch Metric Learning is not installed: '
                          'pip install pytorch-metric-learning==2.9.0') from error
    package = importlib.import_module(f'pytorch_metric_learning.{module}')
    base_cls = getattr(package, base)
    valid = sorted(n for n, c in vars(package).items()
                   if isinstance(c, type) and issubclass(c, base_cls) and c is not base_cls)
    cls = getattr(package, name, None) if isinstance(name, str) else None
    if cls is None or not (isinstance(cls, type) and issubclass(cls, base_cls)) \
            or cls is base_cls:
        raise ArgumentError(f'name={name!r} is not a pytorch_metric_learning.{module} '
                            f'class; expected one of {valid}', 'name')
    return cls


def build_pml(module: str, cls: type, kwargs: dict):
    """``cls(**kwargs)``; a TypeError naming the class and the arguments otherwise."""
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise TypeError(f'cannot build pytorch_metric_learning.{module}.'
                        f'{cls.__name__} with {kwargs}: {error}') from error


def init_takes(cls: type, argument: str) -> bool:
    """Whether ``cls`` or one of its bases names ``argument`` in ``__init__``."""
    return any(argument in inspect.signature(c.__init__).parameters
               for c in cls.__mro__ if '__init__' in vars(c))
