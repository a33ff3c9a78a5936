"""The one numeric argument check (irtbox.utils.checks)."""
import numpy as np
import pytest

from irtbox.utils.checks import (check_int, check_number, check_positive_int, check_positive_ints,
                                 int_argument)


@pytest.mark.parametrize('value', [1, 7, np.int64(3), np.int32(1)])
def test_positive_int_accepted(value):
    out = check_positive_int(value, 'chunk_size')
    assert out == value and type(out) is int


@pytest.mark.parametrize('value', [0, -2, True, False, 1.0, 2.5, '3', None, np.float32(2)])
def test_positive_int_refused_names_argument_and_value(value):
    with pytest.raises(ValueError) as info:
        check_positive_int(value, 'chunk_size')
    assert str(info.value) == f'chunk_size must be a positive integer, got {value!r}'


def test_positive_int_none_allowed():
    assert check_positive_int(None, 'chunk_size', allow_none=True) is None
    with pytest.raises(ValueError, match=r'^chunk_size must be None or a positive integer, '
                                         r'got 0$'):
        check_positive_int(0, 'chunk_size', allow_none=True)


def test_int_minimum():
    assert check_int(0, 'memory_size', minimum=0) == 0
    with pytest.raises(ValueError, match=r'^memory_size must be a non-negative integer, '
                                         r'got -1$'):
        check_int(-1, 'memory_size', minimum=0)
    assert check_int(2, 'num_layers', minimum=2) == 2
    with pytest.raises(ValueError, match=r'^num_layers must be an integer >= 2, got 1$'):
        check_int(1, 'num_layers', minimum=2)


def test_number():
    assert check_number(0, 'weight') == 0.0
    assert check_number(np.float32(0.5), 'weight') == 0.5
    assert check_number(2, 'timeout', strict=True) == 2.0
    for bad in (-0.1, True, float('nan'), '1', None):
        with pytest.raises(ValueError, match=r'^weight must be a non-negative number, got '):
            check_number(bad, 'weight')
    with pytest.raises(ValueError, match=r'^timeout must be a positive number, got 0$'):
        check_number(0, 'timeout', strict=True)
    with pytest.raises(ValueError, match=r'^margin must be a number >= 0.5, got 0.25$'):
        check_number(0.25, 'margin', minimum=0.5)


def test_positive_ints():
    assert check_positive_ints(5, 'ks') == (5, )
    assert check_positive_ints(np.int64(2), 'ks') == (2, )
    out = check_positive_ints([1, np.int64(4), 8], 'ks')
    assert out == (1, 4, 8) and all(type(k) is int for k in out)
    assert check_positive_ints((), 'ks') == ()
    for bad in ((1, 0), (1, True), (2.0, ), (1, -3)):
        with pytest.raises(ValueError) as info:
            check_positive_ints(bad, 'ks')
        assert str(info.value) == f'ks must hold positive integers, got {bad[-1]!r} in ks={bad}'
    with pytest.raises(ValueError, match=r'^kappas must be a positive integer or a sequence '
                                         r'of them, got 1.5$'):
        check_positive_ints(1.5, 'kappas')
    with pytest.raises(ValueError, match='kappas must be a positive integer or a sequence'):
        check_positive_ints(True, 'kappas')


def test_int_argument_parses_or_names_the_expected_range():
    import argparse
    assert int_argument(0)('0') == 0 and int_argument(1)('12') == 12
    for minimum, text, message in ((1, '0', 'the value must be a positive integer, got 0'),
                                   (0, '-1', 'the value must be a non-negative integer, got -1'),
                                   (1, 'x', "the value must be a positive integer, got 'x'"),
                                   (1, '2.5', "the value must be a positive integer, got '2.5'")):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            int_argument(minimum)(text)
        assert str(refused.value) == message
    parser = argparse.ArgumentParser(prog='tool')
    parser.add_argument('--jobs', type=int_argument(1))
    with pytest.raises(SystemExit):
        parser.parse_args(['--jobs', '0'])
