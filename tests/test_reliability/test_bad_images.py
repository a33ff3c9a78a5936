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
    ('truncated', 'the image cannot be decoded (image file is truncated'),
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def _kinds():
    """(name, encoded bytes, the RGB pixels a viewer shows), each expectation computed from
    how the file was made, not by a decoder."""
    rng = np.random.RandomState(3)
    upright = rng.randint(0, 256, (5, 7, 3), np.uint8)
    kinds = []
    # EXIF Orientation=6 ("rotate 90 degrees clockwise to display"): stored turned the other way.
    exif = Image.Exif()
    exif[0x0112] = 6
    kinds.append(('exif_orientation', _encode(Image.fromarray(np.rot90(upright, k=1)), 'PNG',
                                              exif=exif), upright))
    # 16-bit grey: 8-bit decoders keep the high byte (Pillow's convert('RGB') clips at 255).
    grey16 = rng.randint(0, 65536, (5, 7)).astype(np.uint16)
    kinds.append(('png_16_bit', _encode(Image.fromarray(grey16), 'PNG'),
                  np.repeat((grey16 >> 8).astype(np.uint8)[..., None], 3, axis=2)))
    # CMYK without black: R, G, B = 255 - C, 255 - M, 255 - Y.
    cmyk = np.concatenate([255 - upright, np.zeros((5, 7, 1), np.uint8)], axis=2)
    kinds.append(('cmyk', _encode(Image.fromarray(cmyk, 'CMYK'), 'TIFF'), upright))
    # Palette: every pixel is its palette entry.
    palette = rng.randint(0, 256, (256, 3), np.uint8)
    index = rng.randint(0, 256, (5, 7)).astype(np.uint8)
    kinds.append(('palette', _encode(_paletted(index, palette), 'PNG'), palette[index]))
    # An animated GIF: its first frame.
    second = _paletted((255 - index).astype(np.uint8), palette)
    kinds.append(('animated_gif', _encode(_paletted(index, palette), 'GIF', save_all=True,
                                          append_images=[second], optimize=False),
                  palette[index]))
    return kinds


def _paletted(index, palette):
    image = Image.fromarray(index, 'P')
    image.putpalette(palette.reshape(-1).tolist())
    return image


def _encode(image, format, **kwargs):
    buffer = io.BytesIO()
    image.save(buffer, format, **kwargs)
    return buffer.getvalue()


@pytest.mark.parametrize('name, data, shown', _kinds(), ids=[k[0] for k in _kinds()])
def test_one_decoder_for_the_pipeline_and_the_uploads(name, data, shown, tmp_path):
    # Before: the page's uploads were decoded by Pillow's convert('RGB'): no EXIF orientation
    # (a phone photo found other images at 0.954, itself not first), 16-bit clipped at 255.
    from irtbox.search.server import decode_upload
    path = tmp_path / f'{name}.img'
    path.write_bytes(data)
    pipeline = load(path)['img'][..., ::-1]  # the pipeline's BGR (index, query, test, extract)
    np.testing.assert_array_equal(pipeline, shown)
    np.testing.assert_array_equal(decode_upload(data, 10**6), shown)
    assert load(path, color_type='grayscale')['img'].shape == shown.shape[:2]


def test_a_gif_is_listed_and_read(tmp_path):
    # Before: list_images (search build, extract) skipped GIFs without listing them.
    from irtbox.apis.extract import list_images
    name, data, shown = [k for k in _kinds() if k[0] == 'animated_gif'][0]
    (tmp_path / 'a.gif').write_bytes(data)
    (tmp_path / 'b.png').write_bytes(png_header(3, 2))
    assert list_images(str(tmp_path)) == [str(tmp_path / 'a.gif'), str(tmp_path / 'b.png')]
    np.testing.assert_array_equal(load(tmp_path / 'a.gif')['img'][..., ::-1], shown)
