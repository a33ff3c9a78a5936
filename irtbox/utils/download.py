"""Downloads that cannot leave a corrupt file: ``download(url, sha256)`` returns a verified path. An
http(s) file is written to ``<dst>.part``, checked (size, then sha256) and only then renamed into
place; an interrupted download resumes with an HTTP ``Range`` request, within the call and across
calls. A verified file gets a record ``<dst>.sha256.json`` (size, mtime_ns, sha256), so a later call
re-hashes it only when it changed (pooch has neither Range resume nor such a record). Offline
(``IRTBOX_OFFLINE`` or ``HF_HUB_OFFLINE``) only verified cached files are returned."""
import contextlib
import hashlib
import http.client
import json
import logging
import os
import os.path as osp
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Optional, Tuple
from urllib.parse import unquote, urlparse

from mmengine.logging import print_log
from tqdm import tqdm

from .errors import IrtboxError
from .fileio import atomic_write_text, read_json, rename_into_place

__all__ = ['OFFLINE_VARS', 'DownloadError', 'ChecksumError', 'OfflineError', 'UnreachableError',
           'irtbox_home', 'is_offline', 'sha256sum', 'download', 'recorded_sha256', 'remove_download']

try:
    import fcntl
except ImportError:  # no flock (Windows): concurrent downloads of one file are then unguarded
    fcntl = None

USER_AGENT = 'irtbox'
OFFLINE_VARS = ('IRTBOX_OFFLINE', 'HF_HUB_OFFLINE')
ACCEPTED_FORMS = ('http(s)://host/path, file:///abs/path, hf://owner/repo/path/in/repo[@revision] '
                  'or a local path')
_TRUTHY = ('1', 'true', 'yes', 'on')
_HASH_IN_NAME = re.compile(r'-([0-9a-fA-F]{8,64})\.')
_CONTENT_RANGE = re.compile(r'bytes\s+(\d+)-\d+/(\d+|\*)')
_READ_SIZE = 1 << 16
# Beside a downloaded file: its verification record and the lock of whoever fetches it.
_RECORD, _LOCK = '.sha256.json', '.lock'
# Server answers worth asking again a moment later (the .part is kept and resumed).
_RETRY_STATUS = (408, 429, 500, 502, 503, 504)


class DownloadError(IrtboxError, RuntimeError):
    """A good file could not be obtained."""


class ChecksumError(DownloadError):
    """The file's sha256 is not the expected one."""


class OfflineError(DownloadError):
    """Offline, and no verified copy of the file is cached."""


class UnreachableError(DownloadError):
    """The server's name does not resolve: no network (or no DNS) here."""


class _Interrupted(IrtboxError, ConnectionError):
    """The body stopped before its end (``total`` bytes, when the server said so)."""

    def __init__(self, received: int, total: Optional[int]):
        super().__init__(f'connection closed after {received} of {total} bytes')
        self.total = total


# Failures where the same request may well succeed a moment later, resuming from the .part.
_TRANSIENT = (_Interrupted, http.client.HTTPException, ConnectionError, socket.timeout,
              urllib.error.URLError)


def irtbox_home() -> str:
    """irtbox's cache root: ``$IRTBOX_HOME``, by default ``~/.cache/irtbox``."""
    return osp.expanduser(os.environ.get('IRTBOX_HOME') or osp.join('~', '.cache', 'irtbox'))


def _offline_reason() -> Optional[str]:
    """``VAR=value`` of the first variable that makes us offline, None when online."""
    for var in OFFLINE_VARS:
        value = os.environ.get(var, '')
        if value.strip().lower() in _TRUTHY:
            return f'{var}={value}'
    return None


def is_offline() -> bool:
    """True when ``IRTBOX_OFFLINE`` or ``HF_HUB_OFFLINE`` is 1/true/yes/on (any case)."""
    return _offline_reason() is not None


def sha256sum(path: str, chunk_size: int = 1 << 20) -> str:
    """The sha256 hex digest of a file, read in chunks (checkpoints do not fit in memory twice)."""
    return _hash_file(hashlib.sha256(), path, chunk_size).hexdigest()


def _hash_file(digest, path: str, chunk_size: int = 1 << 20):
    """Feed the bytes of ``path`` to ``digest`` (a hashlib object) and return it."""
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(chunk_size), b''):
            digest.update(chunk)
    return digest


def download(url: str, sha256: Optional[str] = None, *, cache_dir: Optional[str] = None,
             filename: Optional[str] = None, progress: bool = True, retries: int = 3,
             timeout: float = 60.0, md5: Optional[str] = None) -> str:
    """The local path of the file at ``url``, verified against ``sha256``.

    Args:
        url: ``http(s)://...`` (downloaded into the cache), ``file:///abs/path`` or a plain
            path (verified in place), or ``hf://owner/repo/path/in/repo[@revision]``
            (fetched with ``huggingface_hub.hf_hub_download``; a path containing ``@``
            needs an explicit ``@revision``).
        sha256: the full hex digest. Without it, a file name ``name-<hex prefix>.ext``
            (at least 8 hex digits) is checked against that prefix.
        cache_dir: where http(s) files go; ``<irtbox_home()>/checkpoints`` by default.
        filename: the cache file name; the URL path's last component by default.
        progress: show a progress bar on stderr while downloading.
        retries: how often an interrupted download is resumed within this call.
        timeout: seconds for connecting and for each read.
        md5: a published md5 hex digest (datasets publish md5, not sha256), checked on the
            downloaded ``.part`` before it is renamed into place, and on a local file; the
            sha256 record is still written, so later calls check the cheap record.

    Raises:
        ChecksumError: the file's sha256 is not the expected one.
        OfflineError: offline and no verified cached copy.
        DownloadError: the server answered with an error or the transfer kept failing.
        FileNotFoundError: a local file that does not exist.
        ValueError: an unsupported URL or a malformed ``sha256``.
    """
    expected = _normalize(sha256, 'sha256', 64)
    md5 = _normalize(md5, 'md5', 32)
    scheme = url.split('://', 1)[0].lower() if '://' in url else ''
    if scheme in ('http', 'https'):
        name = filename or _url_basename(url)
        dst = osp.join(cache_dir or osp.join(irtbox_home(), 'checkpoints'), name)
        return _download_http(url, dst, expected or _hash_in_name(name), progress, retries,
                              timeout, md5)
    if scheme in ('', 'file'):
        path = _verify_local(url, expected)
        if md5:
            _check_md5(path, md5, url, f'the file {path} was left as it is')
        return path
    if scheme == 'hf':
        return _download_hf(url, expected)
    raise ValueError(f'unsupported URL {url!r}: expected {ACCEPTED_FORMS}')


def _normalize(digest: Optional[str], name: str, digits: int) -> Optional[str]:
    """The lower-case digest; a malformed one is an error, not a silently skipped check."""
    if digest is not None and not (isinstance(digest, str)
                                   and re.fullmatch(f'[0-9a-fA-F]{{{digits}}}', digest)):
        raise ValueError(f'{name} must be {digits} hex digits, got {digest!r}')
    return digest and digest.lower()


def _check_md5(path: str, md5: str, url: str, what_happened: str) -> None:
    digest = _hash_file(hashlib.md5(), path).hexdigest()
    if digest != md5:
        raise ChecksumError(f'md5 mismatch for {url}: expected {md5} (published), got {digest}; '
                            f'{what_happened}')


def _hash_in_name(name: str) -> Optional[str]:
    """The sha256 prefix of a torch-hub style name ``name-<hex prefix>.ext``, else None."""
    match = _HASH_IN_NAME.search(osp.basename(name))
    return match.group(1).lower() if match else None


def _describe(expected: str) -> str:
    return expected if len(expected) == 64 else f'{expected}... (the prefix in the file name)'


def _url_basename(url: str) -> str:
    name = osp.basename(unquote(urlparse(url).path))
    if not name:
        raise ValueError(f'cannot tell a file name from URL {url}; pass filename=')
    return name


# --- local files and the Hugging Face Hub -------------------------------------------------

def _local_path(url: str) -> str:
    """The path of ``file:///abs/path`` (or ``file://localhost/...``) or of a plain path."""
    if '://' not in url:
        return osp.expanduser(url)
    parsed = urlparse(url)
    if parsed.netloc not in ('', 'localhost'):
        raise ValueError(f'file URL {url} names host {parsed.netloc!r}; use file:///abs/path')
    return unquote(parsed.path)


def _verify_local(url: str, expected: Optional[str]) -> str:
    """A local file, checked in place (never copied: it may be large and is already here)."""
    path = _local_path(url)
    if not osp.isfile(path):
        raise FileNotFoundError(f'file {path} does not exist (from {url})')
    expected = expected or _hash_in_name(path)
    if expected:
        digest = sha256sum(path)
        if not digest.startswith(expected):
            raise ChecksumError(f'sha256 mismatch for {url}: expected {_describe(expected)}, got '
                                f'{digest}; the file {path} was left as it is')
    return path


def _parse_hf(url: str) -> Tuple[str, str, Optional[str]]:
    """``hf://owner/repo/path/in/repo[@revision]`` -> (repo_id, path in repo, revision)."""
    rest = url[len('hf://'):]
    head, at, revision = rest.rpartition('@')
    if not at:
        head, revision = rest, None
    parts = head.split('/', 2)
    if len(parts) < 3 or not all(parts) or revision == '':
        raise ValueError(f'malformed Hugging Face URL {url!r}: expected '
                         'hf://owner/repo/path/in/repo[@revision]')
    return f'{parts[0]}/{parts[1]}', parts[2], revision


def _download_hf(url: str, expected: Optional[str]) -> str:
    """Fetch through ``hf_hub_download`` (its cache, resume and offline mode), then verify; a
    cached copy that fails the check is fetched once more with ``force_download``."""
    repo_id, filename, revision = _parse_hf(url)
    expected = expected or _hash_in_name(filename)
    path = _hf_fetch(url, repo_id, filename, revision, force=False)
    if not expected:
        return path
    digest = sha256sum(path)
    if not digest.startswith(expected) and not is_offline():
        print_log(f'{path} (from {url}) has sha256 {digest}, expected {_describe(expected)}; '
                  'fetching it again', logger='current', level=logging.WARNING)
        path = _hf_fetch(url, repo_id, filename, revision, force=True)
        digest = sha256sum(path)
    if not digest.startswith(expected):
        raise ChecksumError(f'sha256 mismatch for {url}: expected {_describe(expected)}, got '
                            f'{digest}; the file was left in the Hugging Face cache at {path}')
    return path


def _hf_fetch(url: str, repo_id: str, filename: str, revision: Optional[str],
              force: bool) -> str:
    import huggingface_hub
    reason = _offline_reason()
    try:
        return huggingface_hub.hf_hub_download(
            repo_id=repo_id, filename=filename, revision=revision,
            local_files_only=reason is not None, force_download=force)
    except Exception as err:  # the hub raises many classes (HTTP, not found, not cached, ...)
        if reason:
            cache = huggingface_hub.constants.HF_HUB_CACHE
            raise OfflineError(f'cannot fetch {url}: offline ({reason}) and not in the Hugging '
                               f'Face cache {cache}: {err}') from err
        raise DownloadError(f'could not fetch {url} (repo {repo_id}, file {filename}, '
                            f'revision {revision or "default"}) from the Hugging Face Hub: '
                            f'{err}') from err


# --- http(s) --------------------------------------------------------------------------------

def _download_http(url: str, dst: str, expected: Optional[str], progress: bool, retries: int,
                   timeout: float, md5: Optional[str] = None) -> str:
    reason = _offline_reason()
    if _cached_ok(dst, url, expected, online=reason is None, timeout=timeout):
        return dst
    if reason:
        raise OfflineError(f'cannot download {url}: offline ({reason}) and no verified copy in '
                           f'the cache at {dst}; unset {reason.split("=")[0]} or put the file '
                           'there')
    os.makedirs(osp.dirname(dst) or '.', exist_ok=True)
    with _exclusive_lock(dst + _LOCK):
        # Another process may have fetched it while we waited.
        record = _read_record(dst) if osp.isfile(dst) else None
        if _record_is_current(record, dst) and record['sha256'].startswith(expected or ''):
            return dst
        _fetch(url, dst, expected, progress, retries, timeout, md5)
    return dst


@contextlib.contextmanager
def _exclusive_lock(path: str):
    """Hold an exclusive ``flock`` on ``path``: one writer per ``.part`` (e.g. DDP ranks).
    The lock file is removed before the lock is released, so none is left behind; a waiter
    that then gets the lock of a removed file opens the path again."""
    if fcntl is None:
        yield
        return
    while True:
        f = open(path, 'a')
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()  # the holder before us removed this file: lock the path's current one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def recorded_sha256(path: str) -> str:
    """The sha256 of a file :func:`download` wrote or verified: from its record when the
    file is unchanged since, else computed."""
    record = _read_record(path)
    return record['sha256'] if _record_is_current(record, path) else sha256sum(path)


def remove_download(path: str) -> None:
    """Remove a file :func:`download` wrote and what it keeps beside it (its verification
    record and lock file); any of them may be missing already."""
    for p in (path, path + _RECORD, path + _LOCK):
        if osp.exists(p):
            os.remove(p)


def _read_record(path: str) -> Optional[dict]:
    """The verification record of ``path``; None when missing or unreadable."""
    try:
        record = read_json(path + _RECORD)
        types = tuple(type(record[key]) for key in ('size', 'mtime_ns', 'sha256'))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return record if types == (int, int, str) else None


def _record_is_current(record: Optional[dict], path: str) -> bool:
    """Whether ``path`` is unchanged (size and mtime) since the record was written."""
    if record is None:
        return False
    stat = os.stat(path)
    return (record['size'], record['mtime_ns']) == (stat.st_size, stat.st_mtime_ns)


def _write_record(path: str, digest: str) -> None:
    """Record ``path``'s size, mtime and sha256, atomically (readers never see half a file)."""
    stat = os.stat(path)
    text = json.dumps(dict(size=stat.st_size, mtime_ns=stat.st_mtime_ns, sha256=digest))
    atomic_write_text(path + _RECORD, text)


def _cached_ok(dst: str, url: str, expected: Optional[str], online: bool,
               timeout: float) -> bool:
    """Whether the cached ``dst`` is good (a damaged one is warned of). Re-hashed only when
    changed since its record; with no known hash the record's is the reference; with no
    record either, the size is compared with the server's (online only)."""
    if not osp.isfile(dst):
        return False
    record = _read_record(dst)
    if _record_is_current(record, dst):
        digest = record['sha256']
    elif expected is None and record is None:
        return _size_matches_server(dst, url, online, timeout)
    else:
        digest = sha256sum(dst)
    reference = expected or record['sha256']
    if not digest.startswith(reference):
        print_log(f'cached file {dst} (from {url}) is damaged or outdated: sha256 {digest}, '
                  f'expected {_describe(reference)}; fetching it again', logger='current',
                  level=logging.WARNING)
        return False
    if not _record_is_current(record, dst):
        # A read-only shared cache stays usable: the file is then verified again next time.
        with contextlib.suppress(OSError):
            _write_record(dst, digest)
    return True


def _size_matches_server(dst: str, url: str, online: bool, timeout: float) -> bool:
    """For a cached file with neither hash nor record: compare its size with the server's
    (a file cut short by code that wrote in place); accepted, unrecorded, when unknown."""
    remote = _remote_size(url, timeout) if online else None
    if remote is None:
        return True
    size = osp.getsize(dst)
    if size != remote:
        print_log(f'cached file {dst} has {size} bytes but {url} has {remote}; fetching it '
                  'again', logger='current', level=logging.WARNING)
        return False
    with contextlib.suppress(OSError):  # as in _cached_ok
        _write_record(dst, sha256sum(dst))
    return True


def _remote_size(url: str, timeout: float) -> Optional[int]:
    """Content-Length of a HEAD request; None when it fails or the server does not say."""
    request = urllib.request.Request(url, method='HEAD', headers={'User-Agent': USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get('Content-Length', '')
    except (OSError, http.client.HTTPException):  # URLError and timeouts are OSErrors
        return None
    return int(length) if length.isdigit() else None


def _fetch(url: str, dst: str, expected: Optional[str], progress: bool, retries: int,
           timeout: float, md5: Optional[str] = None) -> None:
    """Download into ``<dst>.part``, verify, then rename into place and record the hash."""
    part = dst + '.part'
    digest = _fetch_with_retries(url, part, progress, retries, timeout, not (expected or md5))
    try:
        if expected and not digest.startswith(expected):
            raise ChecksumError(f'sha256 mismatch for {url}: expected {_describe(expected)}, '
                                f'got {digest}; the download was deleted ({part})')
        if md5:
            _check_md5(part, md5, url, f'the download was deleted ({part})')
    except ChecksumError:
        os.remove(part)
        raise
    # The old file's record must not vouch for the new file, even for a moment.
    with contextlib.suppress(FileNotFoundError):
        os.remove(dst + _RECORD)
    rename_into_place(part, dst)
    _write_record(dst, digest)


def _fetch_with_retries(url: str, part: str, progress: bool, retries: int, timeout: float,
                        need_length: bool) -> str:
    """sha256 of the complete ``part``; interrupted transfers are resumed up to ``retries``.
    ``need_length``: no checksum will vouch for the file, so its end must be known (see
    :func:`_fetch_once`)."""
    attempt = 0
    while True:
        try:
            return _fetch_once(url, part, progress, timeout, need_length)
        except urllib.error.HTTPError as err:  # before URLError: HTTPError is one
            err.close()
            if err.code not in _RETRY_STATUS or attempt >= retries:
                raise DownloadError(f'could not download {url}: HTTP {err.code} '
                                    f'{err.reason}') from err
        except _TRANSIENT as err:
            if isinstance(getattr(err, 'reason', None), socket.gaierror):
                # Not a moment's failure: asking again only delays the answer.
                raise UnreachableError(
                    f'could not download {url}: the network is unreachable (the name '
                    f'{urlparse(url).hostname} does not resolve: '
                    f'{err.reason.strerror})') from err
            if attempt >= retries:
                total = err.total if isinstance(err, _Interrupted) else None
                kept = (f'the partial file {part} ({_size(part)} bytes) is kept and the next '
                        'call resumes from it' if _size(part) else 'nothing was kept')
                raise DownloadError(
                    f'could not download {url}: received {_size(part)} of '
                    f'{total if total is not None else "an unknown number of"} bytes after '
                    f'{attempt + 1} attempt(s) ({err!r}); {kept}') from err
        attempt += 1
        time.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))


def _size(path: str) -> int:
    return osp.getsize(path) if osp.exists(path) else 0


def _get(url: str, offset: int, timeout: float):
    headers = {'User-Agent': USER_AGENT}
    if offset:
        headers['Range'] = f'bytes={offset}-'
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _open_resumable(url: str, part: str, timeout: float):
    """GET ``url`` continuing ``part``: (response, offset the body starts at). A 206 whose range
    starts where the part ends continues it; a 200 (Range ignored) is the whole file; a 416 or any
    other range starts over from byte 0."""
    offset = _size(part)
    if offset:
        try:
            response = _get(url, offset, timeout)
        except urllib.error.HTTPError as err:
            if err.code != 416:
                raise
            err.close()
        else:
            if response.status != 206:
                return response, 0
            match = _CONTENT_RANGE.match(response.headers.get('Content-Range', ''))
            if match and int(match.group(1)) == offset:
                return response, offset
            response.close()
    return _get(url, 0, timeout), 0


def _total_size(response, offset: int) -> Optional[int]:
    """The full file size the server announces (Content-Range total, or Content-Length)."""
    match = _CONTENT_RANGE.match(response.headers.get('Content-Range', ''))
    if response.status == 206 and match and match.group(2) != '*':
        return int(match.group(2))
    length = response.headers.get('Content-Length', '')
    return offset + int(length) if length.isdigit() else None


def _fetch_once(url: str, part: str, progress: bool, timeout: float, need_length: bool) -> str:
    """One GET into ``part`` (appending on a resume); the sha256 of the complete part. A body of no
    announced size ends where the connection closes, early or not: with ``need_length`` (no
    checksum) the size is asked by a HEAD request, and without one the download is refused rather
    than taken for complete."""
    response, offset = _open_resumable(url, part, timeout)
    with response:
        total = _total_size(response, offset)
        # A chunked body has a marked end: http.client raises IncompleteRead without it.
        delimited = total is not None or \
            response.headers.get('Transfer-Encoding', '').lower() == 'chunked'
        if not delimited and need_length:
            total = _remote_size(url, timeout)
        # The hash covers the whole file: on a resume the bytes already there come first.
        digest = _hash_file(hashlib.sha256(), part) if offset else hashlib.sha256()
        received = offset
        with open(part, 'ab' if offset else 'wb') as f, \
                tqdm(total=total, initial=offset, unit='B', unit_scale=True, unit_divisor=1024,
                     desc=osp.basename(part).rsplit('.part', 1)[0], file=sys.stderr,
                     disable=not progress) as bar:
            for chunk in iter(lambda: response.read(_READ_SIZE), b''):
                f.write(chunk)
                digest.update(chunk)
                bar.update(len(chunk))
                received += len(chunk)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it the real file
    if total is not None and received < total:
        raise _Interrupted(received, total)
    if not delimited and need_length and (total is None or received != total):
        os.remove(part)
        said = ('says no size either' if total is None else
                f'says {total} bytes on a HEAD request, {received} came')
        raise DownloadError(
            f'could not download {url}: the server sends no Content-Length and {said}, and no '
            f'checksum is known, so a connection closed early cannot be told from the end of '
            f'the file; the {received} bytes were not kept. Download it by hand to '
            f'{part[:-len(".part")]}, or give its sha256.')
    return digest.hexdigest()
