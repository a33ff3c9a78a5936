"""Result grids: frame colours read back from the pixels, captions' room, missing images."""
import csv

import numpy as np
import pytest
from PIL import Image

from irtbox.visualization import COLORS, draw_result_grid, load_tile, show_results
from irtbox.visualization.grid import HEADER, PAD


def origin(j, tile, border):
    """Top-left of tile j's frame, from the documented layout (PAD apart, below the title)."""
    return PAD + j * (tile + 2 * border + PAD), HEADER + PAD


def test_frames_have_the_status_colours():
    tile, border = 20, 3
    white = Image.new('RGB', (tile, tile), (255, 255, 255))
    status = ['correct', 'wrong', 'junk', 'correct']
    grid = np.asarray(draw_result_grid(white, [white] * 4, status, [0.9, 0.8, 0.7, 0.6],
                                       title='q', border=border))
    assert grid.shape[1] == PAD + 5 * (tile + 2 * border + PAD)
    for j, kind in enumerate(['query'] + status):
        x, y = origin(j, tile, border)
        for dx, dy in ((1, 1), (tile + border, tile // 2), (tile // 2, tile + 2 * border - 1)):
            assert tuple(grid[y + dy, x + dx]) == COLORS[kind], (j, kind, dx, dy)
        assert tuple(grid[y + border + 5, x + border + 5]) == (255, 255, 255)  # the image


def test_grid_with_fewer_results_than_k_or_none():
    tile = Image.new('RGB', (16, 16))
    assert draw_result_grid(tile, [tile], ['wrong'], [0.1]).width == PAD + 2 * (16 + 10 + PAD)
    assert draw_result_grid(tile, [], [], []).width == PAD + (16 + 10 + PAD)


def test_bad_arguments_are_named():
    tile = Image.new('RGB', (16, 16))
    with pytest.raises(ValueError, match='one of each per result'):
        draw_result_grid(tile, [tile], [], [0.1])
    with pytest.raises(ValueError, match="unknown status \\['maybe'\\]"):
        draw_result_grid(tile, [tile], ['maybe'], [0.1])
    with pytest.raises(ValueError, match='tile 1 is'):
        draw_result_grid(tile, [Image.new('RGB', (8, 16))], ['wrong'], [0.1])


def test_load_tile_fits_and_marks_missing_files(tmp_path):
    path = tmp_path / 'wide.png'
    Image.new('RGB', (40, 10), (0, 0, 200)).save(path)
    tile = np.asarray(load_tile(str(path), 32))
    assert tile.shape == (32, 32, 3)
    assert tuple(tile[16, 16]) == (0, 0, 200) and tuple(tile[0, 16]) == (255, 255, 255)
    assert tuple(np.asarray(load_tile(str(tmp_path / 'nope.png'), 8))[4, 4]) == (235, 235, 235)


@pytest.mark.slow
def test_show_results_grids_match_the_labels(tiny_result, tmp_path):
    out = tmp_path / 'show'
    records = show_results(str(out), tiny_result['embeddings'], tiny_result['image_paths'],
                           labels=tiny_result['labels'], class_names=tiny_result['class_names'],
                           num=6, k=4, progress=False)
    labels = tiny_result['labels']
    assert len(records) == 6 and len(list((out / 'grids').glob('*.png'))) == 6
    assert any(r['failure'] for r in records) and not all(r['failure'] for r in records)
    tile, border = 128, 5
    for rec in records:
        grid = np.asarray(Image.open(out / 'grids' / f"query_{rec['query']}.png"))
        assert rec['query'] not in rec['results'].tolist()  # leave-one-out
        for j, i in enumerate(rec['results'], start=1):
            want = 'correct' if labels[i] == labels[rec['query']] else 'wrong'
            x, y = origin(j, tile, border)
            assert tuple(grid[y + 1, x + 1]) == COLORS[want]
    with open(out / 'failures.csv') as f:
        rows = list(csv.DictReader(f))
    assert [int(r['query']) for r in rows] == [
        r['query'] for r in sorted(records, key=lambda r: (r['ap'], -r['first_correct']))]
    assert {r['label'] for r in rows} <= set(tiny_result['class_names'])


def brute_force_ap(emb, labels, q):
    """AP of leave-one-out query q from a full numpy sort (ties: lower index first)."""
    x = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sims = x @ x[q]
    order = [i for i in np.lexsort((np.arange(len(x)), -sims)) if i != q]
    hits = np.array([labels[i] == labels[q] for i in order])
    ranks = np.flatnonzero(hits) + 1
    return np.mean(np.arange(1, len(ranks) + 1) / ranks)


@pytest.mark.slow
def test_worst_queries_of_the_whole_test_set(tiny_result, tmp_path):
    emb, labels = tiny_result['embeddings'], tiny_result['labels']
    out = tmp_path / 'worst'
    records = show_results(str(out), emb, tiny_result['image_paths'], labels=labels, worst=3,
                           k=4, progress=False)
    aps = np.array([brute_force_ap(emb, labels, q) for q in range(len(emb))])
    assert sorted(r['query'] for r in records) == sorted(np.argsort(aps, kind='stable')[:3])
    for r in records:
        assert r['ap'] == pytest.approx(aps[r['query']])
    assert len(list((out / 'grids').glob('*.png'))) == 3
    with open(out / 'failures.csv') as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 16  # every query
    assert [float(r['ap']) for r in rows] == pytest.approx(sorted(aps), abs=1e-6)
