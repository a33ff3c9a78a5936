"""Annotation pickles: plain data and numpy arrays load, anything else is refused."""
import os
import pickle

import numpy as np
import pytest

from irtbox.datasets.pickle_utils import as_int_array, load_pickle, require_keys


class _Evil:

    def __reduce__(self):
        return (os.system, ('echo owned',))


def test_plain_data_and_numpy_arrays_load(tmp_path):
    obj = {'cids': ['a', 'b'], 'cluster': np.array([3, 4], dtype=np.int32),
           'qidxs': np.int64(1), 'x': (1.5, None, True), 'b': b'\x00\x01'}
    for protocol in (2, 4, 5):
        path = tmp_path / f'p{protocol}.pkl'
        path.write_bytes(pickle.dumps(obj, protocol=protocol))
        got = load_pickle(str(path))
        assert got['cids'] == ['a', 'b'] and got['x'] == (1.5, None, True)
        assert got['b'] == b'\x00\x01' and got['qidxs'] == 1
        np.testing.assert_array_equal(got['cluster'], [3, 4])
        assert got['cluster'].dtype == np.int32


def test_code_in_a_pickle_is_refused(tmp_path):
    path = tmp_path / 'evil.pkl'
    path.write_bytes(pickle.dumps({'gnd': _Evil()}))
    with pytest.raises(ValueError, match=r'evil.pkl.*refusing to load (posix|os|nt)\.system'):
        load_pickle(str(path))


def test_unreadable_and_missing_files(tmp_path):
    path = tmp_path / 'text.pkl'
    path.write_text('imlist,qimlist\n')
    with pytest.raises(ValueError, match='text.pkl'):
        load_pickle(str(path))
    with pytest.raises(FileNotFoundError, match='ann_file .*nope.pkl'):
        load_pickle(str(tmp_path / 'nope.pkl'))


def test_validation_helpers():
    with pytest.raises(KeyError, match=r"f.pkl: missing key\(s\) \['b'\]"):
        require_keys({'a': 1}, ['a', 'b'], 'f.pkl')
    with pytest.raises(ValueError, match='expected a dict'):
        require_keys([1], ['a'], 'f.pkl')
    np.testing.assert_array_equal(as_int_array([2.0, 0], 'w', upper=3), [2, 0])
    assert as_int_array([], 'w').dtype == np.int64
    with pytest.raises(ValueError, match=r'w: expected integers, got 1.5'):
        as_int_array([1, 1.5], 'w')
    with pytest.raises(ValueError, match=r'w\[1\] = -1 is not an index in \[0, 3\)'):
        as_int_array([0, -1], 'w', upper=3)
    with pytest.raises(ValueError, match='expected a list of integers'):
        as_int_array(5, 'w')
