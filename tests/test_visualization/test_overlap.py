"""The overlap report's pictures: the histogram without matplotlib (PIL), the pair grid."""
import importlib.util

import numpy as np
from PIL import Image

from irtbox.visualization import overlap


def test_histogram_without_matplotlib_is_drawn_with_pil(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(overlap.importlib.util, 'find_spec',
                        lambda name, *a: None if name == 'matplotlib' else real(name, *a))
    path = str(tmp_path / 'histogram.png')
    overlap.draw_score_histogram(np.array([0.2, 0.5, 0.99]), 0.9, path)
    with Image.open(path) as image:
        assert image.size == (600, 300)
        # The threshold's red line at x = 30 + 540 * 1.9 / 2.
        assert image.getpixel((543, 150))[0] > 200 > image.getpixel((543, 150))[1]


def test_pair_grid_stacks_one_row_per_pair(tmp_path):
    path = str(tmp_path / 'a.png')
    Image.new('RGB', (20, 10), (0, 0, 255)).save(path)
    grid = overlap.draw_pair_grid([(path, path, 1.0, 'a'), (path, 'missing.png', 0.95, 'b')],
                                  tile=32)
    assert grid.height == 2 * (grid.height // 2) and grid.width < 200
    assert overlap.draw_pair_grid([]) is None
