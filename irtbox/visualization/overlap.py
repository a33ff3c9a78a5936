"""The pictures of a train/test overlap report: the histogram of each test image's best
similarity to the training images, and the likeliest overlapping pairs side by side."""
import importlib.util
from typing import Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .grid import draw_result_grid, load_tile, save_image
from .plotting import pyplot, save_figure

__all__ = ['draw_score_histogram', 'draw_pair_grid']


def draw_score_histogram(scores: np.ndarray, threshold: float, path: str, bins: int = 50,
                         title: str = '') -> str:
    """A PNG at ``path`` of the histogram of ``scores`` (each test image's best similarity to
    the training images) over [-1, 1] with a line at ``threshold``: with matplotlib when it is
    installed, else drawn with PIL (so that the report never needs the plots extra)."""
    counts, edges = np.histogram(np.clip(scores, -1, 1), bins=bins, range=(-1.0, 1.0))
    if importlib.util.find_spec('matplotlib') is not None:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(edges[:-1], counts, width=np.diff(edges), align='edge', color='tab:blue')
        ax.axvline(threshold, color='tab:red', label=f'threshold {threshold:g}')
        ax.set(xlabel='cosine similarity to the nearest training image', ylabel='test images',
               yscale='log' if counts.max() > 100 else 'linear', title=title)
        ax.legend()
        return save_figure(fig, path)
    width, height, pad = 600, 300, 30
    image = Image.new('RGB', (width, height), (255, 255, 255))
    draw, font = ImageDraw.Draw(image), ImageFont.load_default(size=12)
    plot_w, plot_h, top = width - 2 * pad, height - 2 * pad, max(int(counts.max()), 1)
    for i, count in enumerate(counts):
        x0 = pad + plot_w * i / bins
        draw.rectangle((x0, height - pad - plot_h * count / top, x0 + plot_w / bins - 1,
                        height - pad), fill=(31, 119, 180))
    x = pad + plot_w * (threshold + 1) / 2
    draw.line((x, pad, x, height - pad), fill=(214, 39, 40), width=2)
    draw.text((pad, 5), f'{title}  best similarity per test image; threshold {threshold:g}; '
              f'max count {top}', fill=(0, 0, 0), font=font)
    draw.text((pad, height - pad + 5), '-1', fill=(0, 0, 0), font=font)
    draw.text((width - pad - 10, height - pad + 5), '1', fill=(0, 0, 0), font=font)
    save_image(image, path)
    return path


def draw_pair_grid(pairs: Sequence[Tuple[str, str, float, str]], tile: int = 128
                   ) -> Optional[Image.Image]:
    """One row per pair (test image path, training image path, similarity, title), the test
    image first and the training image framed in red, stacked top to bottom; None for no
    pairs."""
    rows = [draw_result_grid(load_tile(test, tile), [load_tile(train, tile)], ['wrong'],
                             [score], title=title, query_caption='test')
            for test, train, score, title in pairs]
    if not rows:
        return None
    grid = Image.new('RGB', (max(r.width for r in rows), sum(r.height for r in rows)),
                     (255, 255, 255))
    y = 0
    for row in rows:
        grid.paste(row, (0, y))
        y += row.height
    return grid
