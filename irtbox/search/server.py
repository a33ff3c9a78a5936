"""A small web app over an ``ImageSearcher``: a page to search by uploading or clicking an
image, and a JSON API. FastAPI + uvicorn (``pip install irtbox[serve]``).

- ``GET /``: the page (no external scripts; works without internet).
- ``POST /search``: multipart ``image`` (a file) or ``position`` (an indexed item), and ``k``
  -> ``{"hits": [{rank, id, score, position, thumbnail}], "took_ms"}``.
- ``GET /thumb/{position}``, ``GET /image/{position}``: an indexed image by its position in
  the manifest, never by a path from the client.
- ``GET /healthz``: ``{"status": "ok", "items", "dim", "factory"}`` (``factory``: the faiss
  factory string).

Uploads are capped in bytes and pixels (checked from the image header before decoding, per
request: Pillow's process-wide ``Image.MAX_IMAGE_PIXELS`` is left as it is); an undecodable
upload gets a 400 that says why.
"""
import io
import os.path as osp
import struct
import threading
import time
from functools import lru_cache

import numpy as np

__all__ = ['decode_upload', 'create_app', 'serve']

STATIC = osp.join(osp.dirname(osp.abspath(__file__)), 'static')


def _import_fastapi():
    try:
        import fastapi
    except ImportError as err:
        raise ImportError('tools/search.py serve needs FastAPI and uvicorn: '
                          'pip install "irtbox[serve]" (fastapi uvicorn python-multipart)') from err
    return fastapi


def _open_checked(data: bytes):
    """``data`` opened as ``Image.open`` opens it (its format's plugin reads the header),
    without Pillow's own decompression-bomb check: the caller has checked the size against
    its own limit, which may be above Pillow's process-wide one (left unchanged)."""
    from PIL import Image
    Image.init()
    for name in Image.ID:
        factory, accept = Image.OPEN[name]
        if accept is not None and not accept(data[:16]):
            continue
        try:
            return factory(io.BytesIO(data), None)
        except (SyntaxError, OSError, ValueError, IndexError, TypeError, struct.error):
            continue
    raise ValueError('not an image (no image format recognises its header)')


def decode_upload(data: bytes, max_pixels: int) -> np.ndarray:
    """An uploaded image as an H x W x 3 uint8 RGB array; ValueError saying what is wrong,
    ImageTooLargeError (an OverflowError) above ``max_pixels`` (read from the header, before
    any pixel is decoded). Pillow's ``Image.MAX_IMAGE_PIXELS`` is neither read nor changed:
    ``max_pixels`` is the limit."""
    from PIL import Image

    from irtbox.utils.image import check_image_bytes
    if not data:
        raise ValueError('the upload is empty')
    check_image_bytes(data, max_pixels)
    try:
        with _open_checked(data) as image:
            return np.asarray(image.convert('RGB'))
    except (OSError, ValueError, Image.DecompressionBombError) as err:
        raise ValueError(f'the image cannot be decoded ({err})') from None


def create_app(searcher, max_upload_bytes: int = 10 * 2**20, max_pixels: int = 40 * 10**6,
               max_k: int = 100, thumb_size: int = 160):
    """The FastAPI app serving ``searcher`` (which must have its model)."""
    fastapi = _import_fastapi()
    from fastapi import File, Form, HTTPException, UploadFile
    from fastapi.responses import FileResponse, HTMLResponse, Response

    app = fastapi.FastAPI(title='irtbox image search', docs_url='/docs')
    lock = threading.Lock()  # one model forward and faiss search at a time: bounded memory
    with open(osp.join(STATIC, 'search.html')) as f:
        page = f.read()

    def item_path(position: int) -> str:
        if not 0 <= position < len(searcher):
            raise HTTPException(404, f'no item at position {position} (the index holds '
                                     f'{len(searcher)})')
        return searcher.ids[position]

    @lru_cache(maxsize=4096)
    def thumbnail(position: int) -> bytes:
        import cv2
        image = cv2.imread(item_path(position), cv2.IMREAD_COLOR)
        if image is None:
            raise HTTPException(404, f'item {position} ({searcher.ids[position]}) is unreadable')
        scale = thumb_size / max(image.shape[:2])
        if scale < 1:
            image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        else:  # tiny images (e.g. digits) shown at a visible size
            image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
        return cv2.imencode('.jpg', image, [cv2.IMWRITE_JPEG_QUALITY, 85])[1].tobytes()

    @app.get('/', response_class=HTMLResponse)
    def index_page():
        return page

    @app.get('/healthz')
    def healthz():
        return dict(status='ok', items=len(searcher), dim=searcher.dim, factory=searcher.factory)

    @app.get('/thumb/{position}')
    def thumb(position: int):
        return Response(thumbnail(position), media_type='image/jpeg',
                        headers={'Cache-Control': 'max-age=3600'})

    @app.get('/image/{position}')
    def full_image(position: int):
        return FileResponse(item_path(position))

    @app.post('/search')
    def search(image: UploadFile = File(None), position: int = Form(None), k: int = Form(10)):
        if not 1 <= k <= max_k:
            raise HTTPException(422, f'k must be between 1 and {max_k}, got {k}')
        started = time.perf_counter()
        if image is not None:
            data = image.file.read(max_upload_bytes + 1)
            if len(data) > max_upload_bytes:
                raise HTTPException(413, f'the upload is larger than the limit of '
                                         f'{max_upload_bytes / 2**20:.1f} MiB')
            try:
                query = decode_upload(data, max_pixels)
            except OverflowError as err:
                raise HTTPException(413, str(err)) from None
            except ValueError as err:
                raise HTTPException(400, f'{image.filename or "upload"}: {err}') from None
        elif position is not None:
            item_path(position)
            query = searcher.embeddings[position]
        else:
            raise HTTPException(422, 'send an image file ("image") or an indexed item '
                                     '("position")')
        with lock:
            hits = searcher.search(query, k=k)
        return dict(took_ms=round(1000 * (time.perf_counter() - started), 2),
                    hits=[dict(h.to_dict(), name=osp.basename(h.id),
                               thumbnail=f'/thumb/{h.position}') for h in hits])

    return app


def serve(searcher, host: str = '127.0.0.1', port: int = 8000, **limits) -> None:
    """Run the app with uvicorn until interrupted."""
    import uvicorn
    uvicorn.run(create_app(searcher, **limits), host=host, port=port, log_level='info')
