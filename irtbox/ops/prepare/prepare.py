"""From nothing to a dataset's layout: download (resumable, verified), unpack, convert. For each
file of a :class:`~irtbox.datasets.spec.DatasetSpec`: get it (official address, ``mirror`` or
``from_dir``), verify it against its published checksum before anything reads it, unpack it beside
the data and move the content into the layout the dataset classes read, then record the step in
``<root>/irtbox_prepare.json`` (size and sha256; without a published checksum, what was received the
first time). A rerun skips the recorded steps."""
import fnmatch
import gzip
import json
import os
import os.path as osp
import posixpath
import shutil
import sys
import tarfile
import zipfile
import zlib
from functools import partial
from typing import Callable, Dict, Iterator, Optional, Tuple

from tqdm import tqdm

from irtbox.utils.download import ChecksumError, download, recorded_sha256, remove_download
from irtbox.utils.errors import IrtboxError
from irtbox.utils.fileio import (atomic_write, atomic_write_text, fsync_dir, read_json,
                                  rename_into_place)
from irtbox.datasets.spec import GB, DatasetSpec, RemoteFile

__all__ = ['MANIFEST_NAME', 'PrepareError', 'prepare_dataset', 'read_manifest', 'space_needed']

MANIFEST_NAME = 'irtbox_prepare.json'  # written in the dataset root by prepare

DOWNLOAD_DIR = 'downloads'  # under the root: archives while they are fetched
_UNPACK_DIR = '.unpacking'  # under the root: an archive's content before it is moved in


class PrepareError(IrtboxError, RuntimeError):
    """A dataset cannot be prepared as asked (missing manual file, no space, bad archive)."""


def read_manifest(root: str) -> dict:
    """The record of what ``prepare`` finished under ``root`` (empty when none)."""
    path = osp.join(root, MANIFEST_NAME)
    if not osp.isfile(path):
        return {}
    try:
        manifest = read_json(path)
    except (OSError, ValueError) as err:
        raise PrepareError(f'{path}: not a readable prepare record ({err}); remove it to '
                           'start over') from err
    return manifest if isinstance(manifest, dict) else {}


def _write_manifest(root: str, manifest: dict) -> None:
    atomic_write_text(osp.join(root, MANIFEST_NAME), json.dumps(manifest, indent=1,
                                                                sort_keys=True))


def _url(info: DatasetSpec, name: str, url: str, mirror: Optional[str]) -> str:
    """Where the file ``name`` is fetched from: ``<mirror>/<dataset>/<name>`` with a mirror,
    else its official address ``url`` (empty for a file behind a form)."""
    return f'{mirror.rstrip("/")}/{info.name}/{name}' if mirror else url


def space_needed(info: DatasetSpec, done: Dict[str, dict], keep_archives: bool,
                 from_dir: Optional[str]) -> int:
    """Bytes the unfinished steps need: their unpacked size, plus the downloaded archives
    (the largest one at a time, or all of them with ``keep_archives``)."""
    todo = [f for f in info.files if f.name not in done and not f.folder]
    final = sum(f.unpacked or f.size for f in todo)
    if from_dir:
        return final
    archives = [f.size for f in todo if f.unpack]
    transient = (sum(archives) if keep_archives else max(archives, default=0))
    return final + transient


def _free_bytes(path: str) -> int:
    path = osp.abspath(path)
    while not osp.exists(path):
        path = osp.dirname(path)
    return shutil.disk_usage(path).free


def prepare_dataset(info: DatasetSpec, root: str, mirror: Optional[str] = None,
                    from_dir: Optional[str] = None, keep_archives: bool = False,
                    check_space: bool = True, progress: bool = True, retries: int = 3,
                    timeout: float = 60.0, log: Callable[[str], None] = None) -> dict:
    """Prepare ``info`` under ``root``; returns the manifest (``files``: one record per file).

    Args:
        mirror: A base URL serving the same files as ``<mirror>/<dataset>/<file name>``.
        from_dir: A folder holding the files under their names (fetched by hand), verified
            and read in place, never deleted; folders of images are linked into the root.
        keep_archives: Keep the downloaded archives under ``<root>/downloads``.
        check_space: Refuse to start when the disk has less free space than :func:`space_needed`.

    Raises:
        PrepareError: a manual file is missing, the disk is too small or an archive is bad.
        irtbox.utils.download.ChecksumError: a file is not the published one (deleted when
            downloaded; nothing of it is unpacked).
    """
    if from_dir is not None and not osp.isdir(from_dir):
        raise PrepareError(f'from_dir {from_dir}: not a folder', argument='from_dir')
    log = log or print
    manifest = read_manifest(root)
    if manifest and manifest.get('dataset') not in (None, info.name):
        raise PrepareError(f'{osp.join(root, MANIFEST_NAME)}: this folder holds '
                           f'{manifest.get("dataset")!r}, not {info.name!r}; choose another '
                           'root', argument='root')
    manifest.setdefault('dataset', info.name)
    done = manifest.setdefault('files', {})
    todo = [f for f in info.files if f.name not in done]
    if not todo:
        log(f'{info.name}: every step is done already ({osp.join(root, MANIFEST_NAME)})')
        return manifest
    log(f'{info.title} -> {root}\n  terms: {info.terms}\n  homepage: {info.homepage}')
    if from_dir is None and mirror is None and any(not f.url and not f.folder for f in todo):
        # Before anything is created: these files need your consent on the publisher's page.
        raise PrepareError(f'it cannot be downloaded without your consent. {info.manual}',
                           argument='from_dir')
    if check_space:
        need, free = space_needed(info, done, keep_archives, from_dir), _free_bytes(root)
        if need > free:
            raise PrepareError(f'not enough free space for {info.name} under {root}: '
                               f'{free / GB:.1f} GB free, about {need / GB:.1f} GB needed '
                               '(sizes in docs/datasets.md); free some space or choose '
                               'another root', argument='root', remedy=dict(check_space=False))
    os.makedirs(root, exist_ok=True)
    for number, f in enumerate(todo, 1):
        log(f'[{number}/{len(todo)}] {f.name}')
        record = _prepare_file(info, f, root, mirror, from_dir, keep_archives, progress,
                               retries, timeout, log)
        if record is None:
            continue  # an optional folder the user does not have
        done[f.name] = record
        _write_manifest(root, manifest)
    shutil.rmtree(osp.join(root, _UNPACK_DIR), ignore_errors=True)
    downloads = osp.join(root, DOWNLOAD_DIR)
    if osp.isdir(downloads) and not os.listdir(downloads):
        os.rmdir(downloads)
    log(f'{info.name}: done')
    return manifest


def _prepare_file(info: DatasetSpec, f: RemoteFile, root: str, mirror: Optional[str],
                  from_dir: Optional[str], keep_archives: bool, progress: bool, retries: int,
                  timeout: float, log) -> Optional[dict]:
    if f.folder:
        return _link_folder(info, f, root, from_dir, log)
    path, record, downloaded = _obtain(info, f, root, mirror, from_dir, progress, retries,
                                       timeout, log)
    if f.unpack:
        try:
            _unpack(f, path, root, progress, log)
        except PrepareError as err:
            if not downloaded:
                raise
            # A file with no published checksum can be a server's error page: fetch it anew.
            _remove_download(path)
            raise PrepareError(f'{err} (the download was deleted: the next run fetches it '
                               'again)') from err
        if downloaded and not keep_archives:
            _remove_download(path)
    else:
        _place(path, osp.join(root, f.dest, f.name), move=downloaded)
    return record


def _obtain(info: DatasetSpec, f: RemoteFile, root: str, mirror: Optional[str],
            from_dir: Optional[str], progress: bool, retries: int, timeout: float,
            log) -> Tuple[str, dict, bool]:
    """(verified local path, its record, whether it was downloaded under the root)."""
    md5 = f.md5
    if from_dir is not None:
        path = osp.join(from_dir, f.name)
        if not osp.isfile(path):
            raise PrepareError(f'{f.name} is not in from_dir {from_dir}'
                               + (f'. {info.manual}' if info.manual else
                                  f' (its official address: {f.url})'), argument='from_dir')
        if f.md5_url and md5 is None:
            md5_path = osp.join(from_dir, posixpath.basename(f.md5_url))
            md5 = _read_md5(md5_path) if osp.isfile(md5_path) else None
        download(path, f.sha256, md5=md5)  # verified in place
        how = _how_checked(f, md5, from_dir=True)
        log(f'  {path}: {how}')
        return path, dict(source=path, size=osp.getsize(path), checksum=how), False
    url = _url(info, f.name, f.url, mirror)
    if not url:
        raise PrepareError(f'{f.name} cannot be downloaded without your '
                           f'consent. {info.manual}', argument='from_dir')
    cache = osp.join(root, DOWNLOAD_DIR)
    if f.md5_url and md5 is None:
        md5_url = _url(info, posixpath.basename(f.md5_url), f.md5_url, mirror)
        md5_path = download(md5_url, cache_dir=cache,
                            progress=False, retries=retries, timeout=timeout)
        md5 = _read_md5(md5_path)
        _remove_download(md5_path)
    try:
        path = download(url, f.sha256, md5=md5, cache_dir=cache, filename=f.name,
                        progress=progress, retries=retries, timeout=timeout)
    except ChecksumError:
        # The download is deleted already; its lock file is all that is left of it.
        _remove_download(osp.join(cache, f.name))
        raise
    how = _how_checked(f, md5, from_dir=False)
    log(f'  {url}: {how}')
    return path, dict(url=url, size=osp.getsize(path), sha256=recorded_sha256(path),
                      checksum=how), True


def _how_checked(f: RemoteFile, md5: Optional[str], from_dir: bool) -> str:
    if f.sha256 or md5:
        kind = 'sha256' if f.sha256 else 'md5'
        return f'{kind} matches the published one ({f.checksum_source or "the dataset spec"})'
    if from_dir:
        return 'no checksum is published: read as it is'
    return 'no checksum is published: its size and sha256 at this first download are recorded'


def _read_md5(path: str) -> str:
    with open(path, encoding='utf-8', errors='replace') as fh:
        words = fh.read().split()
    if not words or len(words[0]) != 32:
        raise PrepareError(f'{path}: expected an md5sum line "<32 hex digits>  <file>", got '
                           f'{" ".join(words[:2])!r}')
    return words[0].lower()


def _remove_download(path: str) -> None:
    """The download with its side files, and the downloads folder once it is empty."""
    remove_download(path)
    folder = osp.dirname(path)
    if osp.basename(folder) == DOWNLOAD_DIR and osp.isdir(folder) and not os.listdir(folder):
        os.rmdir(folder)


def _place(src: str, dst: str, move: bool) -> None:
    """Put a plain file at ``dst``: renamed (a download under the root) or copied beside and
    renamed (a file of ``from_dir``), so ``dst`` is never a part."""
    if move:
        os.makedirs(osp.dirname(dst), exist_ok=True)
        rename_into_place(src, dst)
        remove_download(src)  # what is left of it: the downloader's record and lock
    else:
        atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


def _link_folder(info: DatasetSpec, f: RemoteFile, root: str, from_dir: Optional[str],
                 log) -> Optional[dict]:
    target = osp.join(root, f.dest, f.name)
    source = osp.join(from_dir, f.name) if from_dir else None
    if source is None or not osp.isdir(source):
        log(f'  no folder {f.name}/ given (in the folder of files); put the images at {target}/ '
            f'yourself. {info.manual}')
        if f.optional:
            return None
        raise PrepareError(f'the folder {f.name}/ is needed in from_dir', argument='from_dir')
    if not osp.lexists(target):
        os.makedirs(osp.dirname(target), exist_ok=True)
        os.symlink(osp.abspath(source), target)
        log(f'  linked {target} -> {osp.abspath(source)}')
    elif osp.realpath(target) != osp.realpath(source):
        raise PrepareError(f'{target} exists already; remove it or link it yourself to '
                           f'{source}')
    return dict(source=osp.abspath(source), linked=True)


# --- unpacking --------------------------------------------------------------------------------

def _target(name: str, f: RemoteFile) -> Optional[str]:
    """Where member ``name`` goes (relative to ``dest``), None to skip it. A name escaping
    the folder (absolute, ``..``) is an error: archives must not write outside."""
    name = name.replace('\\', '/')
    while name.startswith('./'):
        name = name[2:]
    parts = [p for p in name.split('/') if p not in ('', '.')]
    if name.startswith('/') or '..' in parts:
        raise PrepareError(f'{f.name}: member {name!r} would be written outside the dataset '
                           'folder; refusing the archive')
    if f.prefix:
        if parts[:1] != [f.prefix]:
            return None
        parts = parts[1:]
    if not parts:
        return None
    if f.include and not any(fnmatch.fnmatch(parts[-1], p) for p in f.include):
        return None
    return parts[-1] if f.flatten else '/'.join(parts)


def _members(path: str, f: RemoteFile) -> Iterator[Tuple[str, object]]:
    """(target, readable file object) of every kept regular file of the archive, streamed."""
    if f.unpack == 'zip':
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as err:
            raise PrepareError(f'{path}: not a zip archive ({err})') from err
        with archive:
            for member in archive.infolist():
                target = None if member.is_dir() else _target(member.filename, f)
                if target is not None:
                    with archive.open(member) as fh:
                        yield target, fh
        return
    try:
        archive = tarfile.open(path, mode='r|*')
    except tarfile.TarError as err:
        raise PrepareError(f'{path}: not a tar archive ({err})') from err
    with archive:
        try:
            for member in archive:
                # Folders are made as needed; links and devices are not data.
                target = _target(member.name, f) if member.isfile() else None
                if target is not None:
                    yield target, archive.extractfile(member)
        except (tarfile.TarError, EOFError, OSError) as err:
            raise PrepareError(f'{path}: a damaged archive ({err}); delete it and prepare '
                               'again') from err


# An archive unpacks to at most this many times its size (images, the datasets' content,
# hardly compress; text annotations about 10 times), or MIN_UNPACK_LIMIT for small ones.
MAX_UNPACK_RATIO = 100
MIN_UNPACK_LIMIT = 64 * 2**20
MB = 1e6


def _unpack(f: RemoteFile, path: str, root: str, progress: bool, log) -> None:
    """Unpack into ``<root>/.unpacking/<archive>`` then move the files into ``<root>/<dest>``:
    a failure leaves nothing of the archive under the dataset's names but what a previous
    run moved (the step is recorded only when all of it is in place)."""
    tmp = osp.join(root, _UNPACK_DIR, f.name)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    count = written = 0
    archive_size = osp.getsize(path)
    limit = max(MAX_UNPACK_RATIO * archive_size, MIN_UNPACK_LIMIT)
    try:  # what a refused archive unpacked so far goes with it
        with tqdm(desc=f'unpacking {f.name}', unit=' files', file=sys.stderr,
                  disable=not progress) as bar:
            for target, fh in _members(path, f):
                out = osp.join(tmp, target)
                if osp.exists(out):
                    raise PrepareError(f'{f.name}: two members become {target} (flattened); '
                                       'the archive is not the expected one')
                os.makedirs(osp.dirname(out), exist_ok=True)
                try:
                    with open(out, 'wb') as dst:
                        for chunk in iter(lambda: fh.read(1 << 20), b''):
                            written += len(chunk)
                            if written > limit:
                                raise PrepareError(
                                    f'{path}: unpacking stopped at {written / MB:.0f} MB, more '
                                    f'than {MAX_UNPACK_RATIO} times the archive\'s '
                                    f'{archive_size / MB:.1f} MB (a decompression bomb, or not '
                                    'the expected archive)')
                            dst.write(chunk)
                except (tarfile.TarError, zipfile.BadZipFile, zlib.error, gzip.BadGzipFile,
                        EOFError) as err:
                    # A member's body cut short (a truncated download) is found only here.
                    raise PrepareError(f'{path}: a damaged archive: {target} cannot be read '
                                       f'({type(err).__name__}: {err})') from None
                count += 1
                bar.update(1)
    except PrepareError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not count:
        raise PrepareError(f'{path}: no file of the expected layout in the archive '
                           f'(looked for {f.prefix + "/" if f.prefix else ""}'
                           f'{" or ".join(f.include) or "*"}); is it the right file?')
    dest = osp.join(root, f.dest)
    # Each unpacked file renamed into its place (copytree only makes the folders), then each
    # folder synced once rather than once per file.
    shutil.copytree(tmp, dest, copy_function=partial(rename_into_place, sync=False),
                    dirs_exist_ok=True)
    for folder, _, _ in os.walk(dest):
        fsync_dir(folder)
    shutil.rmtree(tmp)
    log(f'  unpacked {count} files into {dest}')
