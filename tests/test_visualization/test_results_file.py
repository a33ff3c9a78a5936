"""Pictures from a saved results file (irtbox.visualization.results_file) and the descriptor
analysis of one (irtbox.visualization.descriptor_analysis), on the tiny labelled result."""
import csv
import os.path as osp

import numpy as np
import pytest

from irtbox.structures import EmbeddingSet, save_embeddings
from irtbox.visualization import (analyze_embedding_set, analyze_result_files, browse_results,
                                  load_result_set, plot_results_map)


@pytest.fixture
def results_file(tiny_result, tmp_path):
    """tiny_result as tools/test.py --out writes it: ids relative to the data root, and a
    second metric's set under its tag."""
    root = str(tmp_path / 'images')
    ids = [osp.relpath(p, root) for p in tiny_result['image_paths']]
    main = EmbeddingSet(tiny_result['embeddings'], ids=ids, data_root=root,
                        labels=tiny_result['labels'], class_names=tiny_result['class_names'],
                        metrics={'recall@1': 50.0}, extra=dict(sample_idx=np.arange(16)))
    raw = EmbeddingSet(-tiny_result['embeddings'], ids=ids, data_root=root)
    path = str(tmp_path / 'results.npz')
    save_embeddings(path, {'': main, 'no_whitening': raw})
    return path


def test_load_result_set_picks_the_main_set(results_file, tiny_result):
    data = load_result_set(results_file, need=('ids', 'labels'))
    np.testing.assert_array_equal(data.embeddings, tiny_result['embeddings'])
    assert data.paths() == tiny_result['image_paths']
    raw = load_result_set(results_file, 'no_whitening')
    np.testing.assert_array_equal(raw.embeddings, -tiny_result['embeddings'])
    with pytest.raises(ValueError, match=r"results.npz \(set 'no_whitening'\): no labels"):
        load_result_set(results_file, 'no_whitening', need=('labels', ))
    with pytest.raises(ValueError, match=r"need holds 'colour'; expected some of"):
        load_result_set(results_file, need=('colour', ))


def test_load_result_set_refuses_an_empty_set(tmp_path):
    path = str(tmp_path / 'empty.npz')
    save_embeddings(path, EmbeddingSet(np.zeros((0, 4), np.float32)))
    with pytest.raises(ValueError, match=r'empty.npz: no embeddings \(0 rows\)'):
        load_result_set(path)


@pytest.mark.slow
def test_browse_results(results_file, tmp_path):
    out = tmp_path / 'show'
    records = browse_results(results_file, str(out), num=4, k=3)
    assert len(records) == 4 and (out / 'index.html').is_file()
    with open(out / 'failures.csv') as f:
        assert len(list(csv.DictReader(f))) == 4
    with pytest.raises(ValueError, match=r'results.npz: none of the images is where the file '
                                         r'says.*as the data root'):
        browse_results(results_file, str(tmp_path / 'x'), data_root=str(tmp_path / 'moved'))


@pytest.mark.slow
def test_plot_results_map(results_file, tmp_path):
    png = tmp_path / 'map.png'
    points = plot_results_map(results_file, str(png), method='pca', thumbnails=2,
                              max_points=10)
    assert points.shape == (10, 2) and png.read_bytes().startswith(b'\x89PNG')
    few = str(tmp_path / 'few.npz')
    save_embeddings(few, EmbeddingSet(np.eye(2, dtype=np.float32)))
    with pytest.raises(ValueError, match='few.npz: 2 embeddings; a map needs at least 3'):
        plot_results_map(few, str(tmp_path / 'few.png'), method='pca')


@pytest.mark.slow
def test_descriptor_analysis_of_a_set(results_file, tiny_result, tmp_path):
    from irtbox.evaluation.functional import cumulative_energy, similarity_histograms
    data = load_result_set(results_file)
    result = analyze_embedding_set(data, bins=20, progress=False)
    hist = similarity_histograms(tiny_result['embeddings'], tiny_result['labels'], bins=20)
    assert result['positive'] == hist['positive'].tolist() and result['pairs'] == 'all'
    np.testing.assert_allclose(result['energy'], cumulative_energy(tiny_result['embeddings']))
    assert result['metrics'] == {'recall@1': 50.0}
    with pytest.raises(ValueError, match='needs an is_query array'):
        analyze_embedding_set(data, pairs='query-gallery', progress=False)
    out = tmp_path / 'analysis'
    with pytest.raises(ValueError, match='model names must be unique'):
        analyze_result_files([('A', results_file), ('A', results_file)], str(out))
    with pytest.raises(ValueError, match=r"results.npz \(set 'no_whitening'\): no labels"):
        analyze_result_files([('A', results_file)], str(out), name='no_whitening')
    assert not out.exists()  # every file is read before anything is written
    results = analyze_result_files([('A', results_file)], str(out), bins=20, progress=False)
    assert results['A']['positive'] == result['positive']
    assert results['A']['path'] == results_file
    assert sorted(p.name for p in out.iterdir()) == ['analysis.json', 'energy.png',
                                                     'similarities.png']
