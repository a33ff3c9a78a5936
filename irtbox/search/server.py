"""A small web app over an ``ImageSearcher``: a page to search by uploading or clicking an
image, and a JSON API. FastAPI + uvicorn (``pip install irtbox[serve]``).

- ``GET /``: the page (no external scripts; works without internet).
- ``POST /search``: multipart ``image`` (a file) or ``position`` (an indexed item), and ``k``
  -> ``{"hits": [{rank, id, score, position, thumbnail}], "took_ms"}``.
- ``GET /thumb/{position}``, ``GET /image/{position}``: an indexed image by its position in
  the manifest, never by a path from the client.
- ``GET /healthz``: ``{"status": "ok", "items", "dim", "factory"}`` (``factory``: the faiss
  factory string).

A file of the served index changed since it was loaded (written over, cut short) is a 503 naming
it, on ``/search`` and ``/healthz``, before anything reads it: the server stays up (a mapped
file read after it was cut short would end it with SIGBUS).

Uploads are capped in bytes and pixels; memory is bounded across requests too: uploads are
decoded in a small thread pool under a budget of decoded pixels held at once
(:class:`PixelBudget`), each no larger than the model needs (:func:`query_min_side`)."""
import os
import os.path as osp
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from typing import Optional

import numpy as np

from irtbox.evaluation.neighbours.index import IndexFileChangedError
from irtbox.utils.image import decode_image

from .results import hit_caption

__all__ = ['PixelBudget', 'query_min_side', 'decode_upload', 'create_app', 'serve']

STATIC = osp.join(osp.dirname(osp.abspath(__file__)), 'static')


class PixelBudget:
    """At most ``limit`` decoded pixels held at once, over all requests. ``with budget.hold() as
    held:`` gives an empty share; ``held.resize(n)`` waits until ``n`` pixels fit (growing) or gives
    some back (shrinking). A share larger than the whole budget is granted when nothing else is held
    (it runs alone rather than never). ``in_use`` and ``peak``: the pixels held now and at most."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f'PixelBudget: the limit must be at least 1 pixel, got {limit}')
        self.limit = int(limit)
        self.in_use = self.peak = 0
        self._changed = threading.Condition()

    @contextmanager
    def hold(self):
        held = _Held(self)
        try:
            yield held
        finally:
            held.resize(0)


class _Held:
    """One request's share of a :class:`PixelBudget` (see :meth:`PixelBudget.hold`)."""

    def __init__(self, budget: PixelBudget):
        self.budget, self.pixels = budget, 0

    def resize(self, pixels: int) -> None:
        budget, pixels = self.budget, int(pixels)
        with budget._changed:
            if pixels > self.pixels:
                more = pixels - self.pixels
                budget._changed.wait_for(lambda: budget.in_use + more <= budget.limit or
                                         budget.in_use == self.pixels)
            budget.in_use += pixels - self.pixels
            self.pixels = pixels
            budget.peak = max(budget.peak, budget.in_use)
            budget._changed.notify_all()


# A query is decoded with its short side at least this many times the network's input side.
QUERY_SIDE_MARGIN = 2


def query_min_side(model) -> Optional[int]:
    """The short side a query image needs: ``QUERY_SIDE_MARGIN`` times the largest side of
    the model's input at its largest test scale, when its test pipeline resizes to a size
    that does not follow the image's; None (decode at full size) otherwise."""
    spec = getattr(model, 'input_spec', None)
    if spec is None or spec.size_varies not in ('never', 'aspect'):
        return None
    scales = tuple(spec.test_scales or (1.0,)) + tuple(spec.query_test_scales or ())
    return int(QUERY_SIDE_MARGIN * max(spec.size) * max(max(scales), 1.0) + 0.5)


def decode_upload(data: bytes, max_pixels: int, min_side: Optional[int] = None,
                  held: Optional[_Held] = None) -> np.ndarray:
    """An uploaded image as an H x W x 3 uint8 RGB array, decoded as every image file irtbox
    reads (:func:`irtbox.utils.image.decode_image`); above ``max_pixels`` (read from the
    header) an ImageTooLargeError. ``min_side``: a larger image is decoded reduced by the
    largest whole factor keeping its short side at least that. ``held``: a
    :class:`PixelBudget` share, grown before decoding and shrunk to the returned image's."""
    if not data:
        raise ValueError('the upload is empty')
    return decode_image(data, max_pixels, 'rgb', min_side,
                        held.resize if held is not None else None)


def create_app(searcher, max_upload_bytes: int = 10 * 2**20, max_pixels: int = 40 * 10**6,
               max_k: int = 100, thumb_size: int = 160,
               decode_budget_pixels: Optional[int] = None, decode_threads: int = 2):
    """The FastAPI app serving ``searcher`` (which must have its model). ``decode_budget_pixels``:
    decoded pixels held at once over all requests (default ``max_pixels``); an upload holds its
    share from before decoding until its search is done (``state.decode_budget``)."""
    try:
        import fastapi
    except ImportError as err:
        raise ImportError('the search server needs FastAPI and uvicorn: pip install '
                          '"irtbox[serve]" (fastapi uvicorn python-multipart)') from err
    from fastapi import File, Form, HTTPException, UploadFile
    from fastapi.responses import FileResponse, HTMLResponse, Response

    app = fastapi.FastAPI(title='irtbox image search', docs_url='/docs')
    lock = threading.Lock()  # one model forward and faiss search at a time: bounded memory
    budget = PixelBudget(decode_budget_pixels or max_pixels)
    # Few threads decode: glibc keeps freed memory per thread (its arenas), so images decoded
    # in 40 request threads would leave up to 40 images' worth resident after a burst.
    decoders = ThreadPoolExecutor(max_workers=decode_threads, thread_name_prefix='decode')
    min_side = query_min_side(searcher.model)
    app.state.decode_budget = budget
    with open(osp.join(STATIC, 'search.html')) as f:
        page = f.read()

    def item_path(position: int) -> str:
        if not 0 <= position < len(searcher):
            raise HTTPException(404, f'no item at position {position} (the index holds '
                                     f'{len(searcher)})')
        return searcher.path_of(position)

    def missing(position: int) -> HTTPException:
        return HTTPException(404, f'item {position} ({searcher.path_of(position)}): the file is '
                                  'not there any more (moved or deleted since the index was '
                                  'built); rebuild the index to drop it')

    @lru_cache(maxsize=4096)
    def thumbnail(position: int) -> bytes:
        import cv2
        path = item_path(position)
        if not osp.isfile(path):
            raise missing(position)
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        if image is None:
            raise HTTPException(404, f'item {position} ({path}) is unreadable')
        scale = thumb_size / max(image.shape[:2])
        # Tiny images (e.g. digits) are enlarged to a visible size, pixels kept sharp.
        image = cv2.resize(image, None, fx=scale, fy=scale,
                           interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_NEAREST)
        return cv2.imencode('.jpg', image, [cv2.IMWRITE_JPEG_QUALITY, 85])[1].tobytes()

    @app.get('/', response_class=HTMLResponse)
    def index_page():
        return page

    def unchanged() -> None:
        try:
            searcher.store.check_unchanged()
        except IndexFileChangedError as err:
            raise HTTPException(503, str(err)) from None

    @app.get('/healthz')
    def healthz():
        unchanged()
        return dict(status='ok', items=len(searcher), dim=searcher.dim, factory=searcher.factory)

    @app.get('/thumb/{position}')
    def thumb(position: int):
        return Response(thumbnail(position), media_type='image/jpeg',
                        headers={'Cache-Control': 'max-age=3600'})

    @app.get('/image/{position}')
    def full_image(position: int):
        path = item_path(position)
        try:  # stat now: FileResponse would find the file gone only while sending (a 500)
            stat = os.stat(path)
        except OSError:
            raise missing(position) from None
        return FileResponse(path, stat_result=stat)

    @app.post('/search')
    def search(request: fastapi.Request, image: UploadFile = File(None),
               position: int = Form(None), k: int = Form(10)):
        kind = request.headers.get('content-type', '').partition(';')[0].strip()
        if kind not in ('multipart/form-data', 'application/x-www-form-urlencoded'):
            raise HTTPException(422, f'POST /search takes form fields (multipart/form-data: '
                                f'"image" or "position", and "k"), not {kind or "an empty body"}')
        if not 1 <= k <= max_k:
            raise HTTPException(422, f'k must be between 1 and {max_k}, got {k}')
        started = time.perf_counter()
        if image is None and position is None:
            raise HTTPException(422, 'send an image file ("image") or an indexed item '
                                     '("position")')
        with budget.hold() as held:  # the decoded query's pixels, until its search is done
            if image is not None:
                data = image.file.read(max_upload_bytes + 1)
                if len(data) > max_upload_bytes:
                    raise HTTPException(413, f'the upload is larger than the limit of '
                                             f'{max_upload_bytes / 2**20:.1f} MiB')
                try:
                    query = decoders.submit(decode_upload, data, max_pixels, min_side,
                                            held).result()
                except OverflowError as err:
                    raise HTTPException(413, str(err)) from None
                except ValueError as err:
                    raise HTTPException(400, f'{image.filename or "upload"}: {err}') from None
                del data
            else:
                item_path(position)
                unchanged()  # before its row is read
                query = searcher.embeddings[position]
            with lock:
                unchanged()
                hits = searcher.search(query, k=k)
        return dict(took_ms=round(1000 * (time.perf_counter() - started), 2),
                    hits=[dict(h.to_dict(), name=hit_caption(h.id),
                               thumbnail=f'/thumb/{h.position}') for h in hits])

    return app


def serve(searcher, host: str = '127.0.0.1', port: int = 8000, **limits) -> None:
    """Run the app with uvicorn until interrupted."""
    import uvicorn
    uvicorn.run(create_app(searcher, **limits), host=host, port=port, log_level='info')
