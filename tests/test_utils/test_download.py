"""irtbox.utils.download against a local HTTP server on 127.0.0.1 that can cut connections,
ignore Range requests and count what it is asked: resume, verification, cache records,
offline mode, local files, hf:// and concurrent downloads."""
import hashlib
import os
import os.path as osp
import random
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import irtbox.utils.download as dl
from irtbox.utils.download import (ChecksumError, DownloadError, OfflineError, UnreachableError,
                                   download, irtbox_home, is_offline, sha256sum)

DATA = random.Random(0).randbytes(300_000)
SHA = hashlib.sha256(DATA).hexdigest()
CUT = 100_000  # bytes a cut connection delivers


class ServerState:
    """What the handler serves and how it misbehaves; what it was asked."""

    def __init__(self):
        self.files = {'w.bin': DATA, f'w-{SHA[:8]}.bin': DATA, 'w-0badc0de.bin': DATA}
        self.range_support = True
        self.cut_requests = 0  # the first this many GETs stop after CUT bytes
        self.delay = 0.0  # seconds between 32 KiB chunks, to make downloads overlap
        self.requests = []  # (method, path, Range header)
        self.no_length = False  # no Content-Length on a GET: the close ends the body
        self.head_length = False  # ... but a HEAD says it

    def gets(self):
        return [(path, rng) for method, path, rng in self.requests if method == 'GET']


class Handler(BaseHTTPRequestHandler):

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.respond()

    def do_GET(self):
        self.respond()

    def respond(self):
        state = self.server.state
        rng = self.headers.get('Range')
        state.requests.append((self.command, self.path, rng))
        data = state.files.get(self.path.lstrip('/'))
        if data is None:
            self.send_error(404)
            return
        start = 0
        if rng and state.range_support:
            start = int(re.fullmatch(r'bytes=(\d+)-', rng).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header('Content-Range', f'bytes */{len(data)}')
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            self.send_response(206)
            self.send_header('Content-Range', f'bytes {start}-{len(data) - 1}/{len(data)}')
        else:
            self.send_response(200)
        body = data[start:]
        if not state.no_length or (self.command == 'HEAD' and state.head_length):
            self.send_header('Content-Length', str(len(body)))  # always the full length
        self.end_headers()
        if self.command == 'HEAD':
            return
        if state.cut_requests:
            state.cut_requests -= 1
            self.wfile.write(body[:CUT])
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        for i in range(0, len(body), 1 << 15):
            self.wfile.write(body[i:i + (1 << 15)])
            time.sleep(state.delay)


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    httpd.daemon_threads = True
    httpd.state = ServerState()
    httpd.state.base = f'http://127.0.0.1:{httpd.server_address[1]}/'
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd.state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv('IRTBOX_HOME', str(tmp_path / 'home'))
    for var in dl.OFFLINE_VARS:
        monkeypatch.delenv(var, raising=False)
    return tmp_path / 'home'


def cached(home, name='w.bin'):
    return osp.join(str(home), 'checkpoints', name)


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def write(path, data):
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(data)


def test_irtbox_home_and_offline_switches(monkeypatch, home):
    assert irtbox_home() == str(home)
    monkeypatch.delenv('IRTBOX_HOME')
    assert irtbox_home() == osp.expanduser('~/.cache/irtbox')
    for value, offline in [('1', True), ('TRUE', True), ('Yes', True), ('on', True),
                           ('0', False), ('', False), ('no', False)]:
        for var in dl.OFFLINE_VARS:
            monkeypatch.setenv(var, value)
            assert is_offline() is offline, (var, value)
            monkeypatch.delenv(var)


def test_good_file_is_cached_with_a_record(server, home, capsys):
    path = download(server.base + 'w.bin', SHA.upper())
    assert path == cached(home)
    assert read(path) == DATA
    assert 'w.bin' in capsys.readouterr().err  # the progress bar
    stat = os.stat(path)
    record = dl._read_record(path)
    assert record == dict(size=len(DATA), mtime_ns=stat.st_mtime_ns, sha256=SHA)
    assert not osp.exists(path + '.part')
    assert download(server.base + 'w.bin', SHA, progress=False) == path
    assert len(server.requests) == 1


def test_cache_dir_and_filename(server, tmp_path):
    path = download(server.base + 'w.bin', SHA, cache_dir=str(tmp_path / 'c'), filename='x.pth',
                    progress=False)
    assert path == str(tmp_path / 'c' / 'x.pth')
    assert read(path) == DATA


def test_wrong_sha256_leaves_nothing(server, home):
    url = server.base + 'w.bin'
    with pytest.raises(ChecksumError) as info:
        download(url, '0' * 64, progress=False)
    message = str(info.value)
    assert url in message and '0' * 64 in message and SHA in message and 'deleted' in message
    assert not osp.exists(cached(home))
    assert not osp.exists(cached(home) + '.part')


def test_published_md5_is_checked_before_the_rename(server, home, tmp_path):
    url = server.base + 'w.bin'
    with pytest.raises(ChecksumError, match='md5 mismatch .*expected 0{32} .*deleted'):
        download(url, md5='0' * 32, progress=False)
    assert not osp.exists(cached(home)) and not osp.exists(cached(home) + '.part')
    md5 = hashlib.md5(DATA).hexdigest()
    assert read(download(url, md5=md5.upper(), progress=False)) == DATA
    local = tmp_path / 'l.bin'
    write(str(local), DATA)
    assert download(str(local), md5=md5) == str(local)
    with pytest.raises(ChecksumError, match='left as it is'):
        download(str(local), md5='1' * 32)
    with pytest.raises(ValueError, match='md5 must be 32 hex digits'):
        download(url, md5='abc')


@pytest.mark.slow
def test_cut_connection_resumes_within_the_call(server, home):
    server.cut_requests = 1
    path = download(server.base + 'w.bin', SHA, progress=False)
    assert read(path) == DATA
    assert server.gets() == [('/w.bin', None), ('/w.bin', f'bytes={CUT}-')]


def test_cut_connection_resumes_across_calls(server, home):
    url = server.base + 'w.bin'
    server.cut_requests = 1
    with pytest.raises(DownloadError) as info:
        download(url, SHA, progress=False, retries=0)
    part = cached(home) + '.part'
    message = str(info.value)
    assert url in message and f'{CUT} of {len(DATA)} bytes' in message and part in message
    assert read(part) == DATA[:CUT]
    assert not osp.exists(cached(home))
    path = download(url, SHA, progress=False)
    assert read(path) == DATA
    assert server.gets() == [('/w.bin', None), ('/w.bin', f'bytes={CUT}-')]
    assert not osp.exists(part)


@pytest.mark.slow
@pytest.mark.parametrize('head_says', [False, True])
def test_a_body_of_unknown_length_is_done_only_when_its_size_is_known(server, home, head_says):
    # Before: a server sending no Content-Length that closed half way left a file of half the
    # bytes, recorded as done ("its size and sha256 at this first download are recorded").
    url = server.base + 'w.bin'
    server.no_length, server.cut_requests, server.head_length = True, 1, head_says
    if head_says:  # the size from a HEAD request: the cut is seen and resumed
        assert read(download(url, progress=False)) == DATA
        assert server.gets() == [('/w.bin', None), ('/w.bin', f'bytes={CUT}-')]
        return
    with pytest.raises(DownloadError, match=re.escape(
            f'could not download {url}: the server sends no Content-Length and says no size '
            f'either, and no checksum is known, so a connection closed early cannot be told '
            f'from the end of the file; the {CUT} bytes were not kept')):
        download(url, progress=False)
    assert [n for n in os.listdir(osp.dirname(cached(home))) if not n.endswith('.lock')] == []
    # With a checksum the bytes vouch for themselves.
    assert read(download(url, SHA, progress=False)) == DATA


@pytest.mark.slow
def test_retries_exhausted_keeps_the_part(server, home):
    server.cut_requests = 2
    with pytest.raises(DownloadError, match='next call resumes'):
        download(server.base + 'w.bin', SHA, progress=False, retries=1)
    assert len(server.gets()) == 2
    # the second request resumed and was cut again: CUT more bytes, all of them right
    assert read(cached(home) + '.part') == DATA[:2 * CUT]
    assert not osp.exists(cached(home) + '.lock')  # no lock file is left behind


def test_a_refused_connection_claims_no_partial_file(home):
    with socket.socket() as s:  # a port of 127.0.0.1 that nothing listens on
        s.bind(('127.0.0.1', 0))
        url = f'http://127.0.0.1:{s.getsockname()[1]}/w.bin'
    with pytest.raises(DownloadError) as info:
        download(url, SHA, progress=False, retries=0)
    assert str(info.value).endswith('nothing was kept') and '.part' not in str(info.value)
    assert os.listdir(osp.dirname(cached(home))) == []  # no .part, no .lock


def test_a_name_that_does_not_resolve_is_no_network_at_once(home, monkeypatch):
    """No network (no DNS): one attempt, not retries, and the error says so."""
    calls = []

    def no_dns(host, *args, **kwargs):
        calls.append(host)
        raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')
    monkeypatch.setattr(socket, 'getaddrinfo', no_dns)
    with pytest.raises(UnreachableError, match='the network is unreachable '
                       r'\(the name data.example.org does not resolve: Name or service not'):
        download('https://data.example.org/w.bin', SHA, progress=False, retries=3)
    assert set(calls) == {'data.example.org'} and len(calls) <= 2  # the size probe, one GET
    assert os.listdir(osp.dirname(cached(home))) == []


@pytest.mark.slow
def test_server_without_range_restarts_from_zero(server, home):
    server.range_support = False
    server.cut_requests = 1
    path = download(server.base + 'w.bin', SHA, progress=False)
    assert read(path) == DATA
    assert server.gets() == [('/w.bin', None), ('/w.bin', f'bytes={CUT}-')]


def test_range_not_satisfiable_restarts_from_zero(server, home):
    write(cached(home) + '.part', DATA + b'junk')  # longer than the file: 416
    path = download(server.base + 'w.bin', SHA, progress=False)
    assert read(path) == DATA
    assert server.gets() == [('/w.bin', f'bytes={len(DATA) + 4}-'), ('/w.bin', None)]


@pytest.mark.parametrize('known_hash', [True, False])
def test_truncated_cache_file_is_fetched_again(known_hash, server, home, warnings_logged):
    write(cached(home), DATA[:len(DATA) // 2])  # left in place by older code, no record
    path = download(server.base + 'w.bin', SHA if known_hash else None, progress=False)
    assert read(path) == DATA
    methods = [method for method, _, _ in server.requests]
    assert methods == (['GET'] if known_hash else ['HEAD', 'GET'])
    assert any(path in message for message in warnings_logged)
    assert dl._read_record(path)['sha256'] == SHA


def test_complete_unrecorded_file_passes_the_size_check(server, home):
    write(cached(home), DATA)
    assert read(download(server.base + 'w.bin', progress=False)) == DATA
    assert [method for method, _, _ in server.requests] == ['HEAD']
    assert dl._read_record(cached(home))['sha256'] == SHA  # checked once; no HEAD next time
    download(server.base + 'w.bin', progress=False)
    assert len(server.requests) == 1


@pytest.mark.parametrize('known_hash', [True, False])
def test_damaged_cache_with_stale_record_is_rehashed(known_hash, server, home, warnings_logged):
    url, sha = server.base + 'w.bin', SHA if known_hash else None
    path = download(url, sha, progress=False)
    damaged = bytearray(DATA)
    damaged[1000] ^= 0xFF
    write(path, bytes(damaged))
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
    assert read(download(url, sha, progress=False)) == DATA
    assert len(server.gets()) == 2
    assert any(path in message and 'damaged' in message for message in warnings_logged)


def test_touched_file_is_rehashed_and_rerecorded(server, home):
    path = download(server.base + 'w.bin', SHA, progress=False)
    os.utime(path, ns=(0, 10 ** 18))
    assert download(server.base + 'w.bin', SHA, progress=False) == path
    assert len(server.gets()) == 1
    assert dl._read_record(path)['mtime_ns'] == 10 ** 18


def test_matching_record_is_trusted_without_hashing(server, home, monkeypatch):
    path = download(server.base + 'w.bin', SHA, progress=False)

    def no_hashing(*args, **kwargs):
        raise AssertionError('the file was hashed again')

    monkeypatch.setattr(dl, 'sha256sum', no_hashing)
    monkeypatch.setattr(dl, '_hash_file', no_hashing)
    assert download(server.base + 'w.bin', SHA, progress=False) == path
    assert download(server.base + 'w.bin', progress=False) == path
    assert len(server.requests) == 1
    os.utime(path, ns=(0, 10 ** 18))
    with pytest.raises(AssertionError):  # a changed file is hashed: the patch is effective
        download(server.base + 'w.bin', SHA, progress=False)


@pytest.mark.parametrize('var', ['IRTBOX_OFFLINE', 'HF_HUB_OFFLINE'])
def test_offline(var, server, home, monkeypatch):
    url = server.base + 'w.bin'
    path = download(url, SHA, progress=False)
    monkeypatch.setenv(var, '1')
    assert download(url, SHA, progress=False) == path
    other = server.base + 'w-0badc0de.bin'
    with pytest.raises(OfflineError) as info:
        download(other, progress=False)
    message = str(info.value)
    assert other in message and cached(home, 'w-0badc0de.bin') in message and var in message
    assert len(server.requests) == 1


def test_offline_refuses_a_damaged_cache_file(server, home, monkeypatch, warnings_logged):
    url = server.base + 'w.bin'
    path = download(url, SHA, progress=False)
    write(path, DATA[:-1])
    monkeypatch.setenv('IRTBOX_OFFLINE', 'yes')
    with pytest.raises(OfflineError, match=re.escape(url)):
        download(url, SHA, progress=False)
    assert len(server.requests) == 1


@pytest.mark.parametrize('form', ['file', 'plain'])
def test_local_files(form, tmp_path, home):
    path = str(tmp_path / 'w.bin')
    write(path, DATA)
    url = 'file://' + path if form == 'file' else path
    assert download(url, SHA) == path
    assert download(url) == path
    with pytest.raises(ChecksumError, match=re.escape(path)):
        download(url, '1' * 64)
    assert read(path) == DATA  # verified in place, never touched
    assert not osp.exists(str(home))  # nothing copied into the cache
    missing = str(tmp_path / 'missing.bin')
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        download('file://' + missing if form == 'file' else missing, SHA)


def test_hash_prefix_in_the_file_name(server, home, tmp_path):
    good = f'w-{SHA[:8]}.bin'
    assert read(download(server.base + good, progress=False)) == DATA
    with pytest.raises(ChecksumError, match='0badc0de'):
        download(server.base + 'w-0badc0de.bin', progress=False)
    assert not osp.exists(cached(home, 'w-0badc0de.bin'))
    local = str(tmp_path / 'w-0badc0de.bin')
    write(local, DATA)
    with pytest.raises(ChecksumError):
        download(local)
    assert download(local, SHA) == local  # a full sha256 takes precedence over the name


def test_hugging_face_urls(tmp_path, monkeypatch, warnings_logged):
    import huggingface_hub
    local = str(tmp_path / 'blob.bin')
    write(local, DATA)
    calls = []

    def fake_hf_hub_download(**kwargs):
        calls.append(kwargs)
        return local

    monkeypatch.setattr(huggingface_hub, 'hf_hub_download', fake_hf_hub_download)
    assert download('hf://owner/repo/sub/w.bin@v1.0', SHA) == local
    assert download('hf://owner/repo/w.bin') == local
    assert [(c['repo_id'], c['filename'], c['revision'], c['force_download']) for c in calls] == [
        ('owner/repo', 'sub/w.bin', 'v1.0', False), ('owner/repo', 'w.bin', None, False)]
    calls.clear()
    with pytest.raises(ChecksumError, match=re.escape(local)):
        download('hf://owner/repo/w.bin', '2' * 64)
    assert [c['force_download'] for c in calls] == [False, True]  # a damaged cache: once more
    with pytest.raises(ValueError, match='hf://owner/repo/path'):
        download('hf://owner/repo')


def test_hugging_face_offline(monkeypatch):
    import huggingface_hub
    calls = []

    def not_cached(**kwargs):
        calls.append(kwargs)
        raise FileNotFoundError('not in the cache')

    monkeypatch.setattr(huggingface_hub, 'hf_hub_download', not_cached)
    monkeypatch.setenv('IRTBOX_OFFLINE', '1')
    with pytest.raises(OfflineError) as info:
        download('hf://owner/repo/w.bin')
    assert 'hf://owner/repo/w.bin' in str(info.value) and 'IRTBOX_OFFLINE' in str(info.value)
    assert calls[0]['local_files_only'] is True
    monkeypatch.delenv('IRTBOX_OFFLINE')
    with pytest.raises(DownloadError, match='owner/repo'):
        download('hf://owner/repo/w.bin')
    assert calls[1]['local_files_only'] is False


def test_http_error_names_the_url(server, home):
    url = server.base + 'missing.bin'
    with pytest.raises(DownloadError, match=re.escape(url) + '.*404'):
        download(url, SHA, progress=False)
    assert len(server.requests) == 1  # a 404 is not retried
    assert not osp.exists(cached(home, 'missing.bin'))


@pytest.mark.parametrize('url, sha, message', [
    ('ftp://host/w.bin', None, 'unsupported URL'),
    ('http://127.0.0.1:9/', None, 'file name'),
    ('http://127.0.0.1:9/w.bin', 'abc', '64 hex digits'),
])
def test_bad_arguments(url, sha, message):
    with pytest.raises(ValueError, match=message):
        download(url, sha)


@pytest.mark.slow
def test_concurrent_downloads_fetch_once(server, home):
    server.delay = 0.02  # ~0.2 s per download: the two calls overlap
    url, results, errors = server.base + 'w.bin', [], []
    barrier = threading.Barrier(2)

    def fetch():
        barrier.wait()
        try:
            results.append(download(url, SHA, progress=False))
        except Exception as err:  # reported below, with the thread's result
            errors.append(err)

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [cached(home)] * 2
    assert read(cached(home)) == DATA
    assert server.gets() == [('/w.bin', None)]


def test_sha256sum(tmp_path):
    path = str(tmp_path / 'w.bin')
    write(path, DATA)
    assert sha256sum(path) == SHA
    assert sha256sum(path, chunk_size=7) == SHA
