"""tools/analysis_tools/analyze_embeddings.py (irtbox.visualization.descriptor_analysis) on fake
tools/test.py results files."""
import json

import numpy as np
import pytest

from irtbox.evaluation.functional import (cumulative_energy, effective_dimension,
                                          similarity_histograms)
from irtbox.cli import analyze_embeddings
from irtbox.structures import EmbeddingSet, save_embeddings


def fake_outputs(seed, n, dim, n_classes, rank=None, query_every=None):
    """The arrays a RetrievalMetric keeps: L2-normalised embeddings, labels, ids, query flags."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    centres = rng.normal(size=(n_classes, dim))
    emb = centres[labels] + 0.5 * rng.normal(size=(n, dim))
    if rank is not None:
        emb = emb[:, :rank] @ rng.normal(size=(rank, dim))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    is_query = np.zeros(n, dtype=bool)
    if query_every:
        is_query[::query_every] = True
    return dict(embeddings=emb, labels=labels, sample_idx=np.arange(n), is_query=is_query)


def as_set(outputs, metrics=None):
    """The EmbeddingSet tools/test.py --out writes of a metric's arrays."""
    return EmbeddingSet(outputs['embeddings'], labels=outputs.get('labels'),
                        is_query=outputs.get('is_query'),
                        metrics=metrics or {'recall@1': 0.5},
                        extra=dict(sample_idx=outputs['sample_idx']))


def write_npz(path, outputs, metrics=None):
    """A results file of one test set (``outputs``) or of several ({set name: outputs})."""
    if 'embeddings' in outputs:
        save_embeddings(str(path), as_set(outputs, metrics))
    else:
        save_embeddings(str(path), {name: as_set(o, metrics) for name, o in outputs.items()})
    return str(path)


@pytest.fixture
def two_models(tmp_path):
    """Model A: all pairs (no query flags set), collapsed to rank 3; model B: a query/gallery split."""
    a = fake_outputs(0, 60, 8, 5, rank=3)
    b = fake_outputs(1, 45, 8, 4, query_every=3)
    return (a, write_npz(tmp_path / 'a.npz', a, {'recall@1': 0.25, 'map@r': 0.125}),
            b, write_npz(tmp_path / 'b.npz', b))


@pytest.mark.slow
def test_analysis_matches_the_pure_functions(tmp_path, two_models, capsys):
    a, path_a, b, path_b = two_models
    out = tmp_path / 'figs'
    results = analyze_embeddings.main([f'IRT_L={path_a}', f'IRT_R={path_b}',
                                       '--out-dir', str(out), '--bins', '50'])
    with open(out / 'analysis.json') as f:
        written = json.load(f)
    assert list(written) == ['IRT_L', 'IRT_R'] and written == json.loads(json.dumps(results))
    for name, arrays, query_mask in (('IRT_L', a, None), ('IRT_R', b, b['is_query'])):
        r = written[name]
        energy = cumulative_energy(arrays['embeddings'])
        np.testing.assert_allclose(r['energy'], energy, rtol=1e-12)
        assert r['effective_dims'] == {str(f): effective_dimension(energy, f)
                                       for f in (0.8, 0.9, 0.99)}
        hist = similarity_histograms(arrays['embeddings'], arrays['labels'], bins=50,
                                     query_mask=query_mask)
        assert r['positive'] == hist['positive'].tolist()
        assert r['negative'] == hist['negative'].tolist()
        np.testing.assert_allclose(r['edges'], hist['edges'])
        for key in ('num_positive', 'num_negative', 'mean_positive', 'mean_negative', 'exact'):
            assert r[key] == hist[key]
        assert (r['num_descriptors'], r['dim']) == arrays['embeddings'].shape
    # Model A is rank 3; model B's flags split it into 15 queries x 30 gallery descriptors.
    assert written['IRT_L']['effective_dims']['0.99'] <= 3
    assert written['IRT_L']['pairs'] == 'all'
    assert written['IRT_L']['num_positive'] + written['IRT_L']['num_negative'] == 60 * 59 // 2
    assert written['IRT_R']['pairs'] == 'query-gallery'
    assert written['IRT_R']['num_positive'] + written['IRT_R']['num_negative'] == 15 * 30
    assert written['IRT_L']['metrics'] == {'recall@1': 0.25, 'map@r': 0.125}
    for png in ('energy.png', 'similarities.png'):
        assert (out / png).read_bytes().startswith(b'\x89PNG')
    printed = capsys.readouterr().out
    assert 'IRT_L' in printed and 'IRT_R' in printed and 'd@0.9' in printed


@pytest.mark.slow
def test_sampled_all_pairs_and_linear_axis(tmp_path, two_models):
    a, path_a, b, path_b = two_models
    results = analyze_embeddings.main([f'A={path_a}', f'B={path_b}', '--out-dir',
                                       str(tmp_path / 'o'), '--pairs', 'all', '--max-queries',
                                       '10', '--seed', '3', '--energy-dims', '4', '--linear-x'])
    for name, arrays in (('A', a), ('B', b)):
        hist = similarity_histograms(arrays['embeddings'], arrays['labels'], max_queries=10,
                                     seed=3)
        assert results[name]['pairs'] == 'all' and not results[name]['exact']
        assert results[name]['positive'] == hist['positive'].tolist()
        assert results[name]['num_negative'] == hist['num_negative']
    assert (tmp_path / 'o' / 'energy.png').is_file()


@pytest.mark.slow
def test_prefixed_multi_dataset_npz(tmp_path):
    first, second = fake_outputs(2, 20, 4, 3), fake_outputs(3, 25, 4, 3)
    path = write_npz(tmp_path / 'multi.npz', {'0': first, '1': second})
    with pytest.raises(SystemExit, match=r'--set: .*multi.npz holds 2 sets of embeddings '
                                         r'\(0, 1\): name one'):
        analyze_embeddings.main([f'M={path}', '--out-dir', str(tmp_path / 'o')])
    results = analyze_embeddings.main([f'M={path}', '--out-dir', str(tmp_path / 'o'),
                                       '--set', '1'])
    assert results['M']['num_descriptors'] == 25
    assert results['M']['num_positive'] == similarity_histograms(
        second['embeddings'], second['labels'])['num_positive']
    with pytest.raises(SystemExit, match=r"multi.npz: no set '2' of embeddings; it has '0', '1'"):
        analyze_embeddings.main([f'M={path}', '--out-dir', str(tmp_path / 'o'), '--set', '2'])


def test_errors(tmp_path, two_models, capsys):
    _, path_a, _, path_b = two_models
    out = ['--out-dir', str(tmp_path / 'o')]
    with pytest.raises(SystemExit, match='expected NAME=PATH'):
        analyze_embeddings.main([path_a] + out)
    with pytest.raises(SystemExit, match='missing.npz: no such embeddings file'):
        analyze_embeddings.main([f'A={tmp_path / "missing.npz"}'] + out)
    with pytest.raises(SystemExit, match='model names must be unique'):
        analyze_embeddings.main([f'A={path_a}', f'A={path_b}'] + out)
    no_labels = tmp_path / 'no_labels.npz'
    np.savez(no_labels, embeddings=np.eye(3, dtype=np.float32))
    with pytest.raises(SystemExit, match=r'no_labels.npz: no labels \(.*--gnd'):
        analyze_embeddings.main([f'A={no_labels}'] + out)
    bad_labels = tmp_path / 'bad_labels.npz'
    np.savez(bad_labels, embeddings=np.eye(3, dtype=np.float32), labels=np.arange(2))
    with pytest.raises(SystemExit, match=r'bad_labels.npz: 2 labels for 3 embeddings; expected '
                                         'one per embedding'):
        analyze_embeddings.main([f'A={bad_labels}'] + out)
    not_npz = tmp_path / 'text.npz'
    not_npz.write_text('hello')
    with pytest.raises(SystemExit, match='not a readable .npz'):
        analyze_embeddings.main([f'A={not_npz}'] + out)
    with pytest.raises(SystemExit, match=r"--pairs 'query-gallery' needs an "
                                         r'is_query .*\(\S*a.npz\)'):
        analyze_embeddings.main([f'A={path_a}', '--pairs', 'query-gallery'] + out)
    with pytest.raises(SystemExit):
        analyze_embeddings.main([f'A={path_a}', '--bins', '0'] + out)
    assert 'argument --bins: the value must be a positive integer, got 0' in capsys.readouterr().err
    assert not (tmp_path / 'o').exists()


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit):
        analyze_embeddings.main(['--help'])
    text = capsys.readouterr().out
    assert 'IRT_O=' in text and 'IRT_R=' in text and '--max-queries' in text


@pytest.mark.slow
def test_revisited_ground_truth_pairs(tmp_path):
    """A revisited .npz (no labels, queries first) with its gnd_*.pkl: Fig. 5's setting."""
    import pickle

    from irtbox.evaluation.functional import build_revisited_gnd, ground_truth_histograms
    rng = np.random.default_rng(5)
    n_q, n_db = 3, 12
    emb = rng.normal(size=(n_q + n_db, 6))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    is_query = np.arange(n_q + n_db) < n_q
    raw = [dict(easy=np.array([0, 4]), hard=np.array([7]), junk=np.array([1])),
           dict(easy=np.array([2]), hard=np.array([], dtype=int), junk=np.array([3, 5])),
           dict(easy=np.array([9]), hard=np.array([10, 11]), junk=np.array([], dtype=int))]
    gnd_path = tmp_path / 'gnd_rparis6k.pkl'
    with open(gnd_path, 'wb') as f:
        pickle.dump(dict(gnd=raw, imlist=[f'db{i}' for i in range(n_db)],
                         qimlist=[f'q{i}' for i in range(n_q)]), f)
    npz = write_npz(tmp_path / 'r.npz', dict(embeddings=emb, sample_idx=np.arange(len(emb)),
                                             is_query=is_query), {'roxford5k/mAP_M': 50.0})
    no_flags = tmp_path / 'no_flags.npz'
    save_embeddings(str(no_flags), EmbeddingSet(emb))
    with pytest.raises(SystemExit, match=r'no_flags.npz: no query flags \(is_query\).*'
                                         r'\(run_test, out\)'):
        analyze_embeddings.main([f'IRT_R={no_flags}', '--gnd', str(gnd_path),
                                 '--out-dir', str(tmp_path / 'x')])
    for protocol in ('medium', 'hard'):
        results = analyze_embeddings.main([f'IRT_R={npz}', '--gnd', str(gnd_path),
                                           '--protocol', protocol, '--bins', '20',
                                           '--out-dir', str(tmp_path / protocol)])
        expected = ground_truth_histograms(emb[:n_q], emb[n_q:],
                                           build_revisited_gnd(raw, protocol), bins=20)
        r = results['IRT_R']
        assert r['pairs'] == 'ground-truth'
        assert r['positive'] == expected['positive'].tolist()
        assert r['negative'] == expected['negative'].tolist()
        assert r['num_positive'] == (7 if protocol == 'medium' else 3)  # easy+hard / hard
    with pytest.raises(SystemExit, match=r'r.npz: no labels \(.*RetrievalMetric'):
        analyze_embeddings.main([f'IRT_R={npz}', '--out-dir', str(tmp_path / 'x')])
    with pytest.raises(SystemExit, match='--gnd .*not found'):
        analyze_embeddings.main([f'IRT_R={npz}', '--gnd', str(tmp_path / 'nope.pkl'),
                                 '--out-dir', str(tmp_path / 'x')])
