"""Bad image files get an error naming the file; a decompression bomb is refused from its
header before a pixel is decoded."""
import os.path as osp
import io
import re
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from PIL import Image

from irtbox.datasets.transforms import ImageLoadError, LoadImageFromFile
from irtbox.registry import TRANSFORMS
from irtbox.utils.image import DEFAULT_MAX_PIXELS, check_image_bytes
from tests.test_reliability.reliability_helpers import ROOT

GOOD = osp.join(ROOT, 'tests', 'data', 'sop', 'bicycle_final', '111085122871_0.JPG')


def png_header(width, height, pixels=True):
    """A PNG of width x height black pixels, compressed (~400 KB for 20000 x 20000); without
    ``pixels`` only its header chunk: a valid header declaring an oversized image."""
    def chunk(kind, data):
        crc = struct.pack('>I', zlib.crc32(kind + data))
        return struct.pack('>I', len(data)) + kind + data + crc
    ihdr = struct.pack('>IIBBBBB', width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    header = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', ihdr)
    if not pixels:
        return header + chunk(b'IEND', b'')
    raw = zlib.compressobj(9)
    row = b'\x00' * (1 + width)  # filter byte + one grey byte per pixel
    body = b''.join(raw.compress(row) for _ in range(height)) + raw.flush()
    return header + chunk(b'IDAT', body) + chunk(b'IEND', b'')


def load(path, **kwargs):
    return LoadImageFromFile(**kwargs)(dict(img_path=str(path)))


def test_irtbox_scope_builds_the_checking_transform():
    assert isinstance(TRANSFORMS.build(dict(type='LoadImageFromFile')), LoadImageFromFile)
    assert load(GOOD)['img'].ndim == 3


@pytest.mark.parametrize('damage, message', [
    ('zero_bytes', 'empty file (0 bytes)'),
    ('truncated', 'the image cannot be decoded (truncated or corrupt'),
    ('not_an_image', 'not an image (no image format Pillow reads recognises its header)'),
    ('oversized_header', 'the image is 100000 x 100000 = 10000.0 megapixels'),
])
def test_bad_image_names_the_file(damage, message, tmp_path):
    path = tmp_path / f'{damage}.jpg'
    encoded = io.BytesIO()
    Image.fromarray(np.random.RandomState(0).randint(0, 255, (64, 64, 3), np.uint8)).save(
        encoded, 'JPEG')
    data = encoded.getvalue()
    path.write_bytes({'zero_bytes': b'', 'truncated': data[:len(data) // 2],
                      'not_an_image': b'these are not pixels' * 10,
                      'oversized_header': png_header(100000, 100000, pixels=False)}[damage])
    # Before: mmcv's assert (no reason), or for the header a 40 GB allocation attempt.
    with pytest.raises(ImageLoadError, match=re.escape(message)) as err:
        load(path)
    assert str(err.value).startswith(f'{path}: ') and ' object at 0x' not in str(err.value)


def test_decompression_bomb_refused_before_decoding(tmp_path):
    path = tmp_path / 'bomb.png'
    path.write_bytes(png_header(20000, 20000))  # 400 megapixels; ~400 KB on disk
    tracemalloc.start()
    with pytest.raises(ImageLoadError, match=r'20000 x 20000 = 400\.0 megapixels; the limit is '
                                             r'89\.5') as err:
        load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(err.value).startswith(str(path)) and peak < 50 * 2**20


def test_pixel_cap_is_configurable(tmp_path, monkeypatch):
    path = tmp_path / 'wide.png'
    path.write_bytes(png_header(300, 200))
    assert load(path)['img'].shape == (200, 300, 3)
    with pytest.raises(ImageLoadError, match='300 x 200'):
        load(path, max_pixels=50_000)
    monkeypatch.setenv('IRTBOX_MAX_IMAGE_PIXELS', '50000')
    with pytest.raises(ImageLoadError, match='the limit is 0.1'):
        load(path)
    assert load(path, max_pixels=60_000)['img'].shape == (200, 300, 3)


def test_ignore_empty_still_skips(tmp_path):
    path = tmp_path / 'empty.jpg'
    path.write_bytes(b'')
    assert load(path, ignore_empty=True) is None


def test_one_cap_for_pipelines_and_the_search_server():
    from irtbox.search.server import decode_upload
    assert DEFAULT_MAX_PIXELS == 89_478_485
    bomb = png_header(20000, 20000)
    with pytest.raises(OverflowError, match='20000 x 20000'):
        check_image_bytes(bomb)
    with pytest.raises(OverflowError, match='20000 x 20000'):
        decode_upload(bomb, 40 * 10**6)
    assert decode_upload(png_header(3, 2), 10).shape == (2, 3, 3)
    assert np.asarray(check_image_bytes(png_header(3, 2))).tolist() == [3, 2]
