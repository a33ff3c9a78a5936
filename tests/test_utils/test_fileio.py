"""atomic_write: the old file stays whole when writing fails; no temporary file is left."""
import os

import numpy as np
import pytest

from irtbox.utils.fileio import atomic_write, atomic_write_text


def test_replaces_and_keeps_the_extension(tmp_path):
    path = str(tmp_path / 'sub' / 'a.npz')
    atomic_write(path, lambda tmp: np.savez(tmp, x=np.arange(3)))  # savez adds .npz if missing
    with np.load(path) as f:
        assert f['x'].tolist() == [0, 1, 2]
    atomic_write_text(str(tmp_path / 'b.json'), '{"é": 1}')
    assert (tmp_path / 'b.json').read_text(encoding='utf-8') == '{"é": 1}'
    assert sorted(os.listdir(tmp_path)) == ['b.json', 'sub'] and os.listdir(tmp_path / 'sub') == ['a.npz']


def test_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / 'index.html'
    path.write_text('old')

    def half_then_fail(tmp):
        with open(tmp, 'w') as f:
            f.write('ne')
        raise OSError('disk full')
    with pytest.raises(OSError, match='disk full'):
        atomic_write(str(path), half_then_fail)
    assert path.read_text() == 'old' and os.listdir(tmp_path) == ['index.html']
