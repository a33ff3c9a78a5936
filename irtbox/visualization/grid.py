"""A query and its top-k results side by side in one PNG, each result framed by its status."""
from typing import Optional, Sequence

from PIL import Image, ImageDraw, ImageFont, ImageOps

from irtbox.utils.fileio import atomic_write

__all__ = ['COLORS', 'load_tile', 'draw_result_grid', 'save_image']

# Frame colours (RGB): green = correct, red = wrong, grey = junk (ignored by the
# metric, e.g. the revisited protocol's junk), blue = the query.
COLORS = {
    'correct': (30, 160, 60),
    'wrong': (210, 40, 40),
    'junk': (150, 150, 150),
    'query': (40, 90, 210),
}
PAD = 8  # space around and between tiles
HEADER = 18  # the title line above the tiles
CAPTION = 16  # the text line below each tile
MISSING = (235, 235, 235)


def load_tile(path: Optional[str], size: int) -> Image.Image:
    """The image at ``path`` scaled (aspect kept) to fit a ``size`` x ``size`` white square.

    A missing or unreadable file gives a light grey square instead (the grid still
    shows where it ranked), so one bad file does not stop a report.
    """
    tile = Image.new('RGB', (size, size), (255, 255, 255))
    try:
        with Image.open(path) as img:
            # Scaled up or down to fit: tiny fixture images stay visible.
            img = ImageOps.contain(img.convert('RGB'), (size, size))
    except (OSError, TypeError, ValueError, AttributeError):
        tile.paste(MISSING, (0, 0, size, size))
        return tile
    tile.paste(img, ((size - img.width) // 2, (size - img.height) // 2))
    return tile


def draw_result_grid(query_image: Image.Image, result_images: Sequence[Image.Image],
                     status: Sequence[str], scores: Sequence[float], title: str = '',
                     query_caption: str = 'query', border: int = 5) -> Image.Image:
    """One row: the query, then its results in rank order.

    Each tile is framed (``border`` pixels) in ``COLORS[status[j]]`` (the query in
    ``COLORS['query']``) and captioned ``#rank score``; ``title`` goes above.
    All images must be square tiles of one size (see :func:`load_tile`).

    Args:
        query_image: the query tile (S x S).
        result_images: the result tiles (S x S each), best first; may be fewer than k
            (a small gallery) or empty.
        status: 'correct', 'wrong' or 'junk' per result.
        scores: similarity per result.
        title: text above the row (e.g. the query's AP).
        query_caption: text below the query.
        border: frame width in pixels.

    Returns:
        The RGB grid image, (HEADER + 2 PAD + S + 2 border + CAPTION) high.
    """
    if not (len(result_images) == len(status) == len(scores)):
        raise ValueError(f'draw_result_grid: {len(result_images)} images, {len(status)} '
                         f'statuses and {len(scores)} scores; expected one of each per result.')
    unknown = sorted(set(status) - set(COLORS) - {'query'})
    if unknown:
        raise ValueError(f'draw_result_grid: unknown status {unknown}; expected '
                         "'correct', 'wrong' or 'junk'.")
    size = query_image.width
    n = 1 + len(result_images)
    framed = size + 2 * border
    width = PAD + n * (framed + PAD)
    height = HEADER + PAD + framed + CAPTION + PAD
    grid = Image.new('RGB', (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(grid)
    font = ImageFont.load_default(size=12)
    draw.text((PAD, 3), title, fill=(0, 0, 0), font=font)
    tiles = [(query_image, 'query', query_caption)] + [
        (img, s, f'#{rank} {score:.3f}')
        for rank, (img, s, score) in enumerate(zip(result_images, status, scores), start=1)]
    for j, (img, kind, caption) in enumerate(tiles):
        if img.size != (size, size):
            raise ValueError(f'draw_result_grid: tile {j} is {img.size}, expected '
                             f'{(size, size)} like the query (use load_tile).')
        x, y = PAD + j * (framed + PAD), HEADER + PAD  # the frame's outer top-left corner
        draw.rectangle((x, y, x + framed - 1, y + framed - 1), fill=COLORS[kind])
        grid.paste(img, (x + border, y + border))
        draw.text((x, y + framed + 2), caption, fill=(0, 0, 0), font=font)
    return grid


def save_image(image: Image.Image, path: str, **kwargs) -> None:
    """Write ``image`` to ``path`` atomically (a file beside it, then renamed); the format
    comes from the suffix, ``kwargs`` go to ``Image.save`` (e.g. ``quality``)."""
    atomic_write(path, lambda tmp: image.save(tmp, **kwargs))
