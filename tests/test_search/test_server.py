"""tools/search.py serve as a user meets it: the JSON API (good and bad uploads, a bounded load
test on loopback) and the page in a real headless Chromium."""
import io
import json
import os
import os.path as osp
import shutil
import socket
import struct
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

from irtbox.apis import init_model
from irtbox.search import ImageSearcher
from irtbox.search.server import create_app, decode_upload
from irtbox.utils.image import ImageTooLargeError

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
pytest.importorskip('fastapi')
MAX_UPLOAD = 200 * 1024


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


@pytest.fixture(scope='module')
def server(digits, tmp_path_factory):
    import uvicorn
    torch.manual_seed(0)
    model = init_model(CONFIG)
    searcher = ImageSearcher(model)
    searcher.add(digits, progress=False)
    app = create_app(searcher, max_upload_bytes=MAX_UPLOAD, max_pixels=4 * 10**6, max_k=50)
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
    yield url, searcher
    server.should_exit = True
    thread.join(timeout=10)


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


def test_search_by_upload_finds_the_image_itself(server):
    url, searcher = server
    path = searcher.ids[17]
    with open(path, 'rb') as f:
        status, body = post(url + '/search', {'k': 5}, {'image': (osp.basename(path), f.read())})
    assert status == 200 and len(body['hits']) == 5
    first = body['hits'][0]
    assert first['id'] == path and first['position'] == 17 and first['score'] > 0.999
    assert [h['rank'] for h in body['hits']] == [1, 2, 3, 4, 5]
    assert body['hits'] == [dict(h.to_dict(), name=osp.basename(h.id),
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
