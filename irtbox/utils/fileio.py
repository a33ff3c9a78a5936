"""Files written whole or not at all, and whether a path can be written before any work."""
import errno
import json
import os
import os.path as osp
import tempfile
from typing import Callable

__all__ = ['atomic_write', 'atomic_write_text', 'rename_into_place', 'fsync_dir', 'read_json',
           'write_problem']


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` for a temporary file beside ``path``, fsync it, rename it onto ``path``
    and fsync the folder: a reader (or a crash, a power loss included) sees the old file or the new
    one, never a part. The temporary name ends with ``path``'s extension, for writers that pick
    their format by it (``np.savez``, ``savefig``). On any error the temporary is removed and an
    ``OSError`` names ``path``. The file gets the umask's mode, not the temporary's private one."""
    folder = osp.dirname(osp.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f'.{osp.basename(path)}.',
                                   suffix='.tmp' + osp.splitext(path)[1])
    except OSError as error:
        raise _naming(error, path) from error
    # mkstemp makes the file private (0600); the result gets the mode any new file would.
    os.chmod(tmp, 0o666 & ~_umask())
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, 'rb+') as f:
            os.fsync(f.fileno())
        rename_into_place(tmp, path, sync=False)
    except OSError as error:
        raise _naming(error, path) from error
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
    fsync_dir(folder)


def _umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux);
    ``os.umask`` can only be read by setting it, which races with other threads."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _naming(error: OSError, path: str) -> OSError:
    """``error`` with ``path`` in its message (a full disk otherwise says only "[Errno 28] No
    space left on device"), and that nothing was left behind."""
    if error.errno is None or path in str(error):
        return error
    return type(error)(error.errno, f'{error.strerror}: cannot write {path} (nothing was '
                       'written; any earlier file there is unchanged)')


def rename_into_place(src: str, dst: str, sync: bool = True) -> None:
    """Rename the finished file ``src`` (written beside ``dst``, on the same file system) onto
    ``dst``, then fsync ``dst``'s folder (``sync``): the one way irtbox puts a file it wrote
    in place, whether :func:`atomic_write` wrote it or a writer that must name its own
    temporary file (a resumable ``.part`` download, weights named by their digest)."""
    os.replace(src, dst)
    if sync:
        fsync_dir(osp.dirname(osp.abspath(dst)))


def fsync_dir(folder: str) -> None:
    """fsync a folder: a rename inside it survives a power loss only once this is done. A
    filesystem that refuses to sync folders (some network and FUSE ones) is let be: the rename
    is done, only not made durable, and failing there would fail every save that succeeded.
    Another error (EIO: a failing disk) is raised naming the folder."""
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        if error.errno in _FSYNC_REFUSALS:
            return
        raise type(error)(error.errno, f'{error.strerror}: could not sync the folder {folder} '
                          'after a rename into it') from error


_FSYNC_REFUSALS = {errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EBADF, errno.EACCES,
                   errno.EPERM, errno.EISDIR}


def atomic_write_text(path: str, text: str) -> None:
    """``text`` (UTF-8) into ``path`` by :func:`atomic_write`."""
    def write(tmp: str) -> None:
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(text)
    atomic_write(path, write)


def read_json(path: str):
    """The JSON value in the file ``path``."""
    with open(path) as f:
        return json.load(f)


def write_problem(path: str, folder: bool = False) -> str:
    """Why a file (with ``folder``, a folder) cannot be written at ``path``, as
    ``'ABSPATH: reason'``; '' when it can. Nothing is left behind."""
    path = osp.abspath(path)
    if osp.exists(path) and osp.isdir(path) != folder:
        return f"{path}: exists and is not a {'folder' if folder else 'file'}"
    parent = path if folder else osp.dirname(path)
    while not osp.exists(parent):
        parent = osp.dirname(parent)
    if not osp.isdir(parent):
        return f'{path}: {parent} is a file, not a folder; expected a path in a writable folder'
    try:
        # Really create a file: permission bits say nothing of read-only mounts, ACLs or root.
        with tempfile.TemporaryFile(dir=parent, prefix='.irtbox-write-check-'):
            pass
    except OSError as error:
        return (f'{path}: cannot write in {parent} ({error.strerror or error}); expected a '
                'writable folder')
    return ''
