"""irtbox.utils.errors: one base for irtbox's exceptions; fields the command line words as options."""
import builtins
import importlib
import inspect
import pkgutil

import pytest

import irtbox
from irtbox.cli import option_of, worded
from irtbox.utils.errors import ArgumentError, IrtboxError


def irtbox_exception_classes():
    """Every exception class defined in irtbox's modules (configs aside), found by walking
    the package."""
    found = {}
    for info in pkgutil.walk_packages(irtbox.__path__, 'irtbox.'):
        if '.configs' in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed here
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found[f'{cls.__module__}.{cls.__qualname__}'] = cls
    return found


def test_every_exception_derives_from_the_base_and_a_builtin():
    classes = irtbox_exception_classes()
    assert len(classes) >= 30 and 'irtbox.engine.hooks.preemption.Preempted' in classes
    standing = {cls for cls in vars(builtins).values() if isinstance(cls, type)
                and issubclass(cls, BaseException)} - {BaseException, Exception}
    del classes['irtbox.utils.errors.IrtboxError']  # the base alone stands for no built-in
    wrong = [name for name, cls in classes.items() if not issubclass(cls, IrtboxError)
             or not any(issubclass(cls, b) for b in standing)]
    assert not wrong, wrong


def test_an_argument_error_carries_its_argument_and_value():
    error = ArgumentError('opset 9: below 11', 'opset', 9)
    assert isinstance(error, ValueError)
    assert (str(error), error.argument, error.value) == ('opset 9: below 11', 'opset', 9)
    assert worded(error) == '--opset 9: below 11'  # the name that starts the message
    assert worded(ArgumentError('below 11', 'opset')) == '--opset: below 11'
    assert worded(ValueError('opset stays')) == 'opset stays'  # no fields: as it is
    assert option_of('k', {'k': '-k'}) == '-k'


def test_a_remedy_reads_as_python_or_as_options():
    error = IrtboxError('no room under /data', argument='root',
                        remedy=dict(check_space=False, retries=5))
    assert str(error) == 'no room under /data (or pass check_space=False, retries=5)'
    assert worded(error, {'check_space': '--no-space-check'}) == (
        '--root: no room under /data (or pass --no-space-check, --retries 5)')


def test_a_command_words_a_bad_argument_as_its_option(tmp_path):
    from irtbox.cli import prepare
    missing = str(tmp_path / 'nowhere')
    with pytest.raises(SystemExit) as info:
        prepare.main(['roxford5k', '--root', str(tmp_path / 'root'), '--from-dir', missing])
    assert str(info.value.code) == f'prepare roxford5k: --from-dir {missing}: not a folder'


def test_a_prefixed_error_keeps_its_type_and_fields():
    from irtbox.utils.errors import with_prefix
    error = ArgumentError('ks must hold positive integers, got 0', 'ks', (1, 0))
    prefixed = with_prefix(error, 'RetrievalMetric')
    assert type(prefixed) is ArgumentError and isinstance(prefixed, ValueError)
    assert str(prefixed) == 'RetrievalMetric: ks must hold positive integers, got 0'
    assert (prefixed.argument, prefixed.value) == ('ks', (1, 0))
    remedied = with_prefix(IrtboxError('no space', remedy={'check_space': False}), 'prepare')
    assert str(remedied) == 'prepare: no space (or pass check_space=False)'
    assert with_prefix(KeyError('x'), 'config').args == ('config: x', )
