"""tools/search.py serve as a user meets it: the JSON API (good and bad uploads, a bounded load
test on loopback, the memory of concurrent large uploads, items whose file is gone) and the
page in a real headless Chromium."""
import contextlib
import io
import json
import multiprocessing
import os
import os.path as osp
import shutil
import socket
import struct
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from PIL import Image

from irtbox.apis import init_model
from irtbox.search import ImageSearcher
from irtbox.search.results import hit_caption
from irtbox.search.server import PixelBudget, create_app, decode_upload, query_min_side
from irtbox.utils.image import ImageTooLargeError
from tests.shared_runs import forkserver

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
pytest.importorskip('fastapi')
MAX_UPLOAD = 200 * 1024
MiB = 2**20


@pytest.fixture(scope='module')
def digits(tmp_path_factory, digits_root):
    """120 test digits (24 per class 5-9, from the digits converter) in one folder."""
    root = tmp_path_factory.mktemp('digits')
    folder = root / 'gallery'
    folder.mkdir()
    for digit in range(5, 10):
        for name in sorted(os.listdir(digits_root / 'test' / str(digit)))[:24]:
            shutil.copy(digits_root / 'test' / str(digit) / name, folder / f'{digit}_{name}')
    return str(folder)


@contextlib.contextmanager
def running(app):
    """The URL of ``app`` served by uvicorn on a free port of 127.0.0.1, in a thread."""
    import uvicorn
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=port, log_level='warning'))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f'http://127.0.0.1:{port}'
    for _ in range(200):
        try:
            urllib.request.urlopen(url + '/healthz', timeout=1).read()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope='module')
def server(digits, tmp_path_factory):
    torch.manual_seed(0)
    model = init_model(CONFIG)
    searcher = ImageSearcher(model)
    searcher.add(digits, progress=False)
    app = create_app(searcher, max_upload_bytes=MAX_UPLOAD, max_pixels=4 * 10**6, max_k=50)
    with running(app) as url:
        yield url, searcher


def post(url, fields=None, files=None, timeout=30):
    """(status, JSON body) of a multipart POST."""
    boundary = uuid.uuid4().hex
    body = io.BytesIO()
    for name, value in (fields or {}).items():
        body.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                   f'{value}\r\n'.encode())
    for name, (filename, data) in (files or {}).items():
        body.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                   f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                   .encode() + data + b'\r\n')
    body.write(f'--{boundary}--\r\n'.encode())
    request = urllib.request.Request(url, data=body.getvalue(), method='POST', headers={
        'Content-Type': f'multipart/form-data; boundary={boundary}'})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def huge_png_header(width, height):
    """A PNG whose header claims width x height (no pixel data): what a decompression bomb
    looks like before decoding."""
    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack(
            '>I', zlib.crc32(kind + data))
    header = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)
    return b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IEND', b'')


@pytest.mark.slow
def test_search_by_upload_finds_the_image_itself(server):
    url, searcher = server
    path = searcher.ids[17]
    with open(path, 'rb') as f:
        status, body = post(url + '/search', {'k': 5}, {'image': (osp.basename(path), f.read())})
    assert status == 200 and len(body['hits']) == 5
    first = body['hits'][0]
    assert first['id'] == path and first['position'] == 17 and first['score'] > 0.999
    assert [h['rank'] for h in body['hits']] == [1, 2, 3, 4, 5]
    assert body['hits'] == [dict(h.to_dict(), name=hit_caption(h.id),
                                 thumbnail=f'/thumb/{h.position}')
                            for h in searcher.search(path, k=5)]


def test_search_by_position_and_thumbnails(server):
    url, searcher = server
    status, body = post(url + '/search', {'position': 3, 'k': 4})
    assert status == 200 and body['hits'][0]['position'] == 3
    with urllib.request.urlopen(url + body['hits'][0]['thumbnail']) as response:
        assert response.headers['Content-Type'] == 'image/jpeg'
        assert response.read()[:2] == b'\xff\xd8'
    health = json.loads(urllib.request.urlopen(url + '/healthz').read())
    assert health == dict(status='ok', items=len(searcher), dim=searcher.dim, factory='Flat')


@pytest.mark.parametrize('path', ['/thumb/100000', '/thumb/-1', '/image/100000',
                                  '/thumb/..%2F..%2Fetc%2Fpasswd', '/image/%2Fetc%2Fpasswd'])
def test_items_only_by_position(server, path):
    url, _ = server
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url + path)
    assert info.value.code in (404, 422)


@pytest.mark.parametrize('name, data, status, message', [
    ('empty.png', b'', 400, 'the upload is empty'),
    ('notes.jpg', b'these are not pixels' * 10, 400, 'notes.jpg: not an image'),
    ('big.bin', b'\x00' * (MAX_UPLOAD + 1), 413, 'larger than the limit of 0.2 MiB'),
    ('bomb.png', huge_png_header(20000, 20000), 413, '20000 x 20000 = 400.0 megapixels'),
    ('cut.png', None, 400, 'cannot be decoded'),
])
def test_bad_uploads_get_a_clear_4xx(server, name, data, status, message):
    url, searcher = server
    if data is None:  # a real PNG cut in half
        with open(searcher.ids[0], 'rb') as f:
            whole = f.read()
        data = whole[:len(whole) // 2]
    got, body = post(url + '/search', {'k': 3}, {'image': (name, data)})
    assert got == status and message in body['detail'], body
    assert post(url + '/search', {'position': 0, 'k': 1})[0] == 200  # still serving


def test_creating_the_app_leaves_pillows_limit_alone(monkeypatch):
    """No process-wide setting: Pillow's own bomb limit is what it was, before and after."""
    from PIL import Image
    before = Image.MAX_IMAGE_PIXELS
    create_app(ImageSearcher(), max_pixels=10**9)
    assert Image.MAX_IMAGE_PIXELS == before is not None
    monkeypatch.setattr(Image, 'MAX_IMAGE_PIXELS', 12345)
    create_app(ImageSearcher())
    assert Image.MAX_IMAGE_PIXELS == 12345


def test_uploads_are_limited_by_the_servers_own_pixel_limit(monkeypatch):
    """Per request, from the header: an image under the server's limit is decoded even
    where Pillow's process-wide limit is lower (Pillow alone would refuse it), one over the
    server's limit is refused whatever Pillow's is."""
    from PIL import Image
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format='PNG')
    data = buffer.getvalue()
    monkeypatch.setattr(Image, 'MAX_IMAGE_PIXELS', 100)  # 1200 pixels: a "bomb" for Pillow
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(data))
    np.testing.assert_array_equal(decode_upload(data, max_pixels=1200), pixels)
    with pytest.raises(ImageTooLargeError, match=r'40 = 0.0 megapixels|30 x 40'):
        decode_upload(data, max_pixels=1199)
    monkeypatch.setattr(Image, 'MAX_IMAGE_PIXELS', None)  # no Pillow limit: ours still holds
    with pytest.raises(ImageTooLargeError, match='20000 x 20000 = 400.0 megapixels'):
        decode_upload(huge_png_header(20000, 20000), max_pixels=4 * 10**6)
    assert Image.MAX_IMAGE_PIXELS is None


@pytest.mark.parametrize('fields, message', [({'k': 0}, 'k must be between 1 and 50'),
                                             ({'k': 51}, 'k must be between 1 and 50'),
                                             ({'k': 3}, 'send an image file')])
def test_bad_requests(server, fields, message):
    url, _ = server
    if fields['k'] != 3:
        fields = dict(fields, position=0)
    status, body = post(url + '/search', fields)
    assert status == 422 and message in str(body['detail'])


def test_a_json_body_is_told_that_form_fields_are_expected(server):
    url, _ = server
    request = urllib.request.Request(url + '/search', data=b'{"position": 0, "k": 3}',
                                     method='POST', headers={'Content-Type': 'application/json'})
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    detail = json.loads(error.value.read())['detail']
    assert error.value.code == 422 and detail.startswith('POST /search takes form fields (') \
        and detail.endswith('not application/json')


@pytest.mark.slow
def test_bounded_load(server):
    """200 searches, 20 at a time, on loopback: every one answered correctly."""
    url, searcher = server
    with open(searcher.ids[5], 'rb') as f:
        upload = f.read()

    def one(i):
        started = time.perf_counter()
        if i % 2:
            status, body = post(url + '/search', {'k': 10}, {'image': ('q.png', upload)})
            expected = 5
        else:
            status, body = post(url + '/search', {'position': i % len(searcher), 'k': 10})
            expected = i % len(searcher)
        return status, body['hits'][0]['position'], expected, time.perf_counter() - started
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(one, range(200)))
    assert all(status == 200 and got == want for status, got, want, _ in results)
    latency = np.array([r[3] for r in results]) * 1000
    print(f'\n200 requests, 20 concurrent: p50 {np.percentile(latency, 50):.1f} ms, '
          f'p99 {np.percentile(latency, 99):.1f} ms')


@pytest.mark.slow
def test_page_in_a_real_browser(server, tmp_path, chromium):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    url, searcher = server
    driver = chromium
    driver.get(url + '/')
    WebDriverWait(driver, 20).until(
        lambda d: str(len(searcher)) in d.find_element(By.ID, 'index-info').text)
    Select(driver.find_element(By.ID, 'k')).select_by_visible_text('10')
    query = searcher.ids[42]
    driver.find_element(By.ID, 'query-file').send_keys(query)
    WebDriverWait(driver, 30).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, '.hit')) == 10)
    hits = driver.find_elements(By.CSS_SELECTOR, '.hit')
    assert hits[0].get_attribute('data-id') == query
    box = "const i = document.querySelector('#query img'); return [i.width, i.height]"
    uploaded = driver.execute_script(box)
    WebDriverWait(driver, 20).until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('.hit img')].every(i => i.complete && "
        "i.naturalWidth > 0)"))
    shot = str(tmp_path / 'search_page.png')
    driver.save_screenshot(shot)
    assert os.path.getsize(shot) > 10000
    keep = os.environ.get('IRTBOX_SCREENSHOT_DIR')  # docs: docs/search_and_export.md's picture
    if keep:
        shutil.copy(shot, osp.join(keep, 'search_page.png'))
    clicked = hits[3].get_attribute('data-id')
    hits[3].click()  # a result searches with itself: it comes first
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "const h = document.querySelector('.hit'); return h && h.dataset.id") == clicked)
    assert driver.find_element(By.ID, 'status').get_attribute('class') != 'error'
    # The file box no longer names the upload; both queries are shown in the same box.
    assert driver.find_element(By.ID, 'query-file').get_attribute('value') == ''
    assert driver.execute_script(box) == uploaded == [160, 160]



@pytest.mark.slow
def test_a_file_gone_since_the_build_is_a_404_naming_it(tmp_path, monkeypatch):
    """An index built with relative paths and served from another folder finds its files;
    /image/N and /thumb/N of a file moved or deleted after the build: a 404 with a JSON
    message naming the file (before: an HTTP 500 from FileResponse)."""
    (tmp_path / 'build').mkdir()
    monkeypatch.chdir(tmp_path / 'build')
    names = []
    for i in range(3):
        names.append(str(tmp_path / 'build' / f'img{i}.png'))
        Image.fromarray(np.full((20, 20, 3), 60 * i, np.uint8)).save(names[-1])
    searcher = ImageSearcher()
    searcher.add(np.eye(3, 4, dtype=np.float32), ids=[osp.basename(n) for n in names])
    searcher.save('index')
    monkeypatch.chdir(tmp_path)
    searcher = ImageSearcher.load('build/index')
    with running(create_app(searcher)) as url:
        with urllib.request.urlopen(url + '/image/1') as response:
            assert response.read() == open(names[1], 'rb').read()
        os.remove(names[1])
        os.rename(names[2], str(tmp_path / 'elsewhere.png'))
        for path in ('/image/1', '/thumb/1', '/image/2', '/thumb/2'):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(url + path)
            assert info.value.code == 404, path
            detail = json.loads(info.value.read())['detail']
            position = int(path[-1])
            assert detail.startswith(f'item {position} ({names[position]}): the file is not '
                                     'there any more (moved or deleted'), detail
        assert urllib.request.urlopen(url + '/thumb/0').read()[:2] == b'\xff\xd8'


def test_a_file_of_the_served_index_changed_in_place_is_a_503_naming_it(tmp_path):
    """Issue 48 item 3: ``cp new.faiss old.faiss`` over a served index (or a truncation) ended
    the server with SIGBUS; now a search and /healthz answer 503 naming the file, and the
    server stays up (what does not read the index still answers)."""
    searcher = ImageSearcher()
    searcher.add(np.eye(3, 4, dtype=np.float32), ids=['a.png', 'b.png', 'c.png'])
    folder = str(tmp_path / 'index')
    searcher.save(folder)
    searcher = ImageSearcher.load(folder)
    with open(osp.join(folder, 'manifest.json')) as f:
        path = osp.join(folder, json.load(f)['files']['embeddings'])
    with running(create_app(searcher)) as url:
        assert post(url + '/search', {'position': 0, 'k': 2})[0] == 200
        time.sleep(0.02)  # a new modification time
        with open(path, 'r+b') as f:
            f.truncate(100)
        status, body = post(url + '/search', {'position': 0, 'k': 2})
        assert status == 503
        assert body['detail'].startswith(f'{path} changed since the index was loaded (written '
                                         'over in place: ')
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(url + '/healthz')
        assert info.value.code == 503 and path in json.loads(info.value.read())['detail']
        assert urllib.request.urlopen(url + '/').status == 200


@pytest.mark.slow
def test_the_pixel_budget_waits_for_room_and_lets_an_oversized_share_run_alone():
    budget, seen = PixelBudget(100), []

    def second():
        with budget.hold() as held:
            held.resize(50)
            seen.append(budget.in_use)
    with budget.hold() as first:
        first.resize(60)
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.2)
        assert seen == [] and budget.in_use == 60  # 60 + 50 > 100: the second waits
        first.resize(40)  # the first image reduced: room for the second
        thread.join(timeout=10)
        assert seen == [90]
    assert budget.in_use == 0
    with budget.hold() as alone:  # more than the whole budget: granted when nothing is held
        alone.resize(500)
        assert budget.in_use == 500
    assert budget.in_use == 0 and budget.peak == 500


def encoded(array, format, **options):
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=format, **options)
    return buffer.getvalue()


@pytest.mark.slow
def test_uploads_are_decoded_no_larger_than_the_model_needs():
    """A JPEG is decoded at 1/8 scale (draft) and any image reduced by a whole factor, keeping
    its short side at least min_side; the budget holds the pixels actually decoded."""
    model = init_model(CONFIG)
    assert query_min_side(model) == 64  # twice the digits model's 32 x 32 input
    y, x = np.mgrid[:1600, :2000]
    gradient = np.stack([x % 256, y % 256, (x + y) % 256], axis=-1).astype(np.uint8)
    budget = PixelBudget(10**8)
    with budget.hold() as held:
        small = decode_upload(encoded(gradient, 'JPEG'), 10**7, min_side=64, held=held)
        assert budget.in_use == small.shape[0] * small.shape[1]
    assert 64 <= min(small.shape[:2]) < 128 and small.shape[2] == 3
    assert budget.peak == 250 * 200 and budget.in_use == 0  # 1/8 of 2000 x 1600: no more
    # A palette PNG (a mode Image.reduce does not take) is reduced as RGB.
    palette = Image.fromarray(gradient).quantize(16)
    buffer = io.BytesIO()
    palette.save(buffer, format='PNG')
    reduced = decode_upload(buffer.getvalue(), 10**7, min_side=64)
    np.testing.assert_array_equal(reduced, np.asarray(palette.convert('RGB').reduce(25)))
    # Without min_side (a model whose input follows the image's size): full size.
    assert decode_upload(encoded(gradient, 'PNG'), 10**7).shape == (1600, 2000, 3)


# Memory: 20 uploads at once of a 3000 x 3000 PNG (9 MP, under a 10 MP cap) against a server
# running in its own process, whose peak resident memory (VmHWM) is read from /proc. Before the
# budget of decoded pixels each upload was decoded at full size at once (Pillow's 4 bytes a
# pixel, its RGB copy, the array, the pipeline's copies), outside the model's lock: +2.0 GB at
# the peak and +1.0 GB kept afterwards in this test (15.5 s); with it, +67 MB (3.6 s), 2 cores.
SIDE = 3000  # the upload: SIDE x SIDE RGB
MAX_PIXELS = 10 * 10**6  # the server's cap; the decode budget is the cap (its default)
DECODE_THREADS = 2  # the server's default
UPLOADS = 20


def _serve(port, gallery, max_pixels, config):
    """The server: a model of ``config`` (random weights), ``gallery`` added, on ``port``."""
    import uvicorn
    # A fresh interpreter's default, not the fork server's (whose semaphores, tqdm's lock,
    # would be left to the resource tracker by a process that ends on its signal).
    multiprocessing.set_start_method('fork', force=True)
    torch.manual_seed(0)
    searcher = ImageSearcher(init_model(config))
    searcher.add(gallery, progress=False)
    app = create_app(searcher, max_upload_bytes=2 * 2**20, max_pixels=max_pixels)
    uvicorn.run(app, host='127.0.0.1', port=port, log_level='warning')


def memory(pid):
    """(VmRSS, VmHWM) of process ``pid`` in bytes."""
    values = {}
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            key, _, rest = line.partition(':')
            if key in ('VmRSS', 'VmHWM'):
                values[key] = int(rest.split()[0]) * 1024
    return values['VmRSS'], values['VmHWM']


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc')
def test_concurrent_large_uploads_stay_within_the_decode_budget(tmp_path, digits_root):
    gallery = tmp_path / 'gallery'
    gallery.mkdir()
    for digit in range(5, 10):
        for name in sorted(os.listdir(digits_root / 'test' / str(digit)))[:2]:
            shutil.copy(digits_root / 'test' / str(digit) / name, gallery / f'{digit}_{name}')
    query = str(gallery / sorted(os.listdir(gallery))[3])
    with open(query, 'rb') as f:
        small = f.read()
    with Image.open(query) as image:  # the digit, blown up: compresses to ~40 KB
        buffer = io.BytesIO()
        image.convert('RGB').resize((SIDE, SIDE), Image.NEAREST).save(buffer, format='PNG')
    big = buffer.getvalue()
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    url = f'http://127.0.0.1:{port}'
    # Its own process, forked from the fork server that has imported torch and irtbox once.
    server = multiprocessing.get_context(forkserver(__name__)).Process(
        target=_serve, args=(port, str(gallery), MAX_PIXELS, CONFIG), daemon=True)
    server.start()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url + '/healthz', timeout=1).read()
                break
            except OSError:
                assert server.is_alive(), f'the server exited ({server.exitcode})'
                assert time.monotonic() < deadline, 'the server did not start within 120 s'
                time.sleep(0.1)

        def burst(data):
            with ThreadPoolExecutor(UPLOADS) as pool:
                return list(pool.map(lambda _: post(url + '/search', {'k': 3},
                                                    {'image': ('q.png', data)}, timeout=60),
                                     range(UPLOADS)))
        # Warm-up: the request threads exist and one large upload has been decoded, so the
        # baseline holds what serving costs whatever the images.
        assert all(status == 200 for status, _ in burst(small))
        assert post(url + '/search', {'k': 3}, {'image': ('q.png', big)})[0] == 200
        try:
            with open(f'/proc/{server.pid}/clear_refs', 'w') as f:
                f.write('5')  # the peak (VmHWM) starts again from the current RSS
        except OSError as err:
            pytest.skip(f'cannot reset the peak memory of the server ({err})')
        baseline, _ = memory(server.pid)
        started = time.perf_counter()
        results = burst(big)
        took = time.perf_counter() - started
        after, peak = memory(server.pid)
    finally:
        server.terminate()
        server.join(timeout=30)
    assert [status for status, _ in results] == [200] * UPLOADS, results[0]
    assert all(body['hits'][0]['id'] == query for _, body in results)
    # At most the budget's pixels are decoded at once, at Pillow's 4 bytes per RGB pixel; each
    # decode thread's malloc arena may keep up to that after its image is freed; 32 MiB for
    # the rest (20 uploads' bytes and parsing, the reduced queries, the responses).
    bound = DECODE_THREADS * MAX_PIXELS * 4 + 32 * MiB
    print(f'\n{UPLOADS} concurrent {SIDE} x {SIDE} uploads in {took:.1f} s: RSS '
          f'{baseline / MiB:.0f} MiB -> peak {peak / MiB:.0f} MiB '
          f'(+{(peak - baseline) / MiB:.0f}, bound +{bound / MiB:.0f}), {after / MiB:.0f} MiB '
          'afterwards')
    assert peak - baseline <= bound, (
        f'the server grew by {(peak - baseline) / MiB:.0f} MiB for {UPLOADS} concurrent '
        f'uploads of {SIDE} x {SIDE}; expected at most {bound / MiB:.0f} MiB')

