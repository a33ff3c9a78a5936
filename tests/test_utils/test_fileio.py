"""atomic_write: the old file stays whole when writing fails; no temporary file is left."""
import errno
import os
import stat

import numpy as np
import pytest

from irtbox.utils.fileio import atomic_write, atomic_write_text, rename_into_place


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


def test_full_disk_names_the_path_and_leaves_nothing(tmp_path):
    import errno
    path = tmp_path / 'index' / 'embeddings.npz'

    def fill_the_disk(tmp):
        with open(tmp, 'wb') as f:
            f.write(b'x' * 100)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    with pytest.raises(OSError, match=r'No space left on device: cannot write .*embeddings\.npz'
                       r' \(nothing was written') as info:
        atomic_write(str(path), fill_the_disk)
    assert info.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / 'index') == []


def test_written_files_get_the_usual_mode(tmp_path):
    previous = os.umask(0o022)
    try:
        atomic_write_text(str(tmp_path / 'model-index.yml'), 'Models: []\n')
    finally:
        os.umask(previous)
    assert (tmp_path / 'model-index.yml').stat().st_mode & 0o777 == 0o644


def test_rename_into_place_syncs_the_folder(tmp_path, monkeypatch):
    """The finished file replaces the old one, and the folder holding the rename is synced
    (without it, a power loss can undo the rename)."""
    import irtbox.utils.fileio as fileio
    synced = []
    monkeypatch.setattr(fileio, 'fsync_dir', synced.append)
    (tmp_path / 'weights.part').write_text('new')
    (tmp_path / 'weights').write_text('old')
    fileio.rename_into_place(str(tmp_path / 'weights.part'), str(tmp_path / 'weights'))
    assert (tmp_path / 'weights').read_text() == 'new'
    assert not (tmp_path / 'weights.part').exists()
    assert synced == [str(tmp_path)]


def test_every_file_irtbox_puts_in_place_is_renamed_by_fileio():
    """docs/architecture.md: files are written beside and renamed into place through one
    module; a rename elsewhere would skip the folder's fsync."""
    import ast
    import os
    import os.path as osp
    package = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'irtbox')
    found = []
    for folder, _, files in os.walk(package):
        for name in files:
            path = osp.join(folder, name)
            if not name.endswith('.py') or path.endswith(osp.join('utils', 'fileio.py')):
                continue
            for node in ast.walk(ast.parse(open(path).read())):
                if isinstance(node, ast.Attribute) and node.attr in ('replace', 'rename') \
                        and isinstance(node.value, ast.Name) and node.value.id == 'os':
                    found.append(f'{osp.relpath(path, package)}:{node.lineno}')
    assert not found, found


@pytest.mark.parametrize('refusal', [errno.EINVAL, errno.EOPNOTSUPP, errno.EACCES])
def test_a_folder_that_refuses_fsync_does_not_fail_saves(tmp_path, monkeypatch, refusal):
    """Issue 47 item 9: a filesystem that refuses to fsync a directory (some network and FUSE
    ones) failed every save after its rename had put the new file in place. Its files are
    saved; a failing disk (EIO) still fails the save, naming the folder."""
    real_fsync = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(refusal, os.strerror(refusal))
        real_fsync(fd)
    monkeypatch.setattr(os, 'fsync', fsync)
    atomic_write_text(str(tmp_path / 'a.txt'), 'new')
    assert (tmp_path / 'a.txt').read_text() == 'new'
    rename_into_place(str(tmp_path / 'a.txt'), str(tmp_path / 'b.txt'))
    refusal = errno.EIO
    with pytest.raises(OSError, match=f'could not sync the folder {tmp_path} after a rename'):
        atomic_write_text(str(tmp_path / 'c.txt'), 'new')
