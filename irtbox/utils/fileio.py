"""Files written whole or not at all."""
import os
import os.path as osp
import tempfile
from typing import Callable

__all__ = ['atomic_write', 'atomic_write_text', 'fsync_dir']


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` for a temporary file beside ``path``, fsync it, rename it onto
    ``path`` and fsync the folder: a reader (or a crash, a power loss included) sees the old
    file or the new one, never a part.

    The temporary name ends with ``path``'s extension, so writers that pick their format by
    it (``np.savez``, ``Image.save``, ``savefig``, ``Config.dump``) write the right one. The
    folder is created if needed; on any error the temporary file is removed.
    """
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f'.{osp.basename(path)}.',
                               suffix='.tmp' + osp.splitext(path)[1])
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, 'rb+') as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)
    fsync_dir(folder)


def fsync_dir(folder: str) -> None:
    """fsync a folder: a rename inside it survives a power loss only once this is done."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str, text: str) -> None:
    """``text`` (UTF-8) into ``path`` by :func:`atomic_write`."""
    def write(tmp: str) -> None:
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(text)
    atomic_write(path, write)
