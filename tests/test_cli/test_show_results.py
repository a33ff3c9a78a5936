"""tools/test.py --show-dir / --out paths, browse_results.py and plot_embeddings.py as a user runs
them, and no registry-scope warning in a run's log."""
import csv
import glob
import json
import os.path as osp
import sys

import numpy as np
import pytest

from irtbox.cli import test as test_tool
from irtbox.cli import browse_results, plot_embeddings
from irtbox.structures import EmbeddingSet, load_embeddings, save_embeddings

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
INSHOP = ['test_dataloader.dataset.type=InShopDataset',
          'test_dataloader.dataset.data_root=tests/data/inshop']


@pytest.fixture(scope='module')
def tested(tmp_path_factory):
    """tools/test.py --out and --show-dir of the random tiny model on the SOP fixture."""
    import os
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        tmp = tmp_path_factory.mktemp('tested')
        out, show = str(tmp / 'results.npz'), str(tmp / 'show')
        test_tool.main([TINY_CONFIG, '--work-dir', str(tmp / 'work'), '--out', out,
                        '--show-dir', show, '--show-num', '5', '--show-topk', '4'])
    finally:
        os.chdir(here)
    return tmp, out, show


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_out_stores_paths_relative_to_the_root(tested):
    _, out, _ = tested
    results = load_embeddings(out)
    root = results.data_root
    assert root == osp.join(ROOT, 'tests', 'data', 'sop')
    paths = list(results.ids)
    assert len(paths) == len(results.embeddings)
    assert all(not osp.isabs(p) and osp.isfile(osp.join(root, p)) for p in paths)
    assert results.paths() == [osp.join(root, p) for p in paths]
    # In sample order: the SOP test split's annotation lines, image column (path_id 4).
    with open(osp.join(root, 'Ebay_test.txt')) as f:
        want = [line.split()[3] for line in f.readlines()[1:] if line.strip()]
    assert paths == want
    assert len(results.class_names) == len(np.unique(results.labels))
    np.testing.assert_array_equal(results.extra['sample_idx'], np.arange(len(paths)))
    with open(out[:-len('.npz')] + '.json') as f:
        assert results.metrics == pytest.approx(json.load(f))


@pytest.mark.slow
def test_out_stores_the_model_identity(tested):
    """The identity of the tested model is the one init_model gives the same config (the
    index compares it): same preprocessing, size and normalisation; the weights' digest
    is that of the tested (randomly initialised) weights."""
    from irtbox.apis import init_model
    from irtbox.apis.identity import model_identity
    _, out, _ = tested
    stored = load_embeddings(out).identity
    assert stored is not None and stored['embedding_dim'] == 32
    assert stored['config'].endswith('tiny_irt.py') and stored['checkpoint'] is None
    expected = model_identity(init_model(TINY_CONFIG))
    for key in ('preprocessing_sha256', 'embedding_dim', 'normalize'):
        assert stored[key] == expected[key], key
    assert len(stored['weights_sha256']) == 64


def test_show_dir_grids_browser_and_csv(tested):
    _, out, show = tested
    assert len(glob.glob(osp.join(show, 'grids', 'query_*.png'))) == 5
    assert osp.isfile(osp.join(show, 'index.html'))
    rows = read_csv(osp.join(show, 'failures.csv'))
    assert len(rows) == 5
    assert set(rows[0]) == {'query', 'image', 'label', 'ap', 'n_relevant', 'first_correct',
                            'failure', 'confusions'}
    labels = np.load(out)['labels']
    # R = the other samples of the query's class (leave-one-out).
    assert [int(r['n_relevant']) for r in rows] == [
        int((labels == labels[int(r['query'])]).sum()) - 1 for r in rows]


@pytest.mark.slow
def test_browse_results_rebuilds_the_same_from_the_npz(tested):
    tmp, out, show = tested
    again = str(tmp / 'again')
    browse_results.main([out, '--out-dir', again, '--show-num', '5', '--topk', '4'])
    assert read_csv(osp.join(again, 'failures.csv')) == read_csv(osp.join(show, 'failures.csv'))
    assert sorted(osp.basename(p) for p in glob.glob(osp.join(again, 'grids', '*.png'))) == \
        sorted(osp.basename(p) for p in glob.glob(osp.join(show, 'grids', '*.png')))


@pytest.mark.slow
def test_browse_results_worst(tested):
    tmp, out, _ = tested
    worst = str(tmp / 'worst')
    records = browse_results.main([out, '--out-dir', worst, '--worst', '2'])
    rows = read_csv(osp.join(worst, 'failures.csv'))
    assert len(rows) == len(np.load(out)['embeddings'])  # every query, worst first
    assert sorted(r['query'] for r in records) == sorted(int(r['query']) for r in rows[:2])
    assert len(glob.glob(osp.join(worst, 'grids', '*.png'))) == 2


def test_browse_results_clear_errors(tested, tmp_path):
    _, out, _ = tested
    data = load_embeddings(out, mmap=False)
    save_embeddings(str(tmp_path / 'no_ids.npz'), EmbeddingSet(data.embeddings,
                                                               labels=data.labels))
    with pytest.raises(SystemExit, match=r'no_ids.npz: no image paths \(ids\) .*'
                                         'write one by testing the model into a .npz results '
                                         r'file \(run_test, out\)'):
        browse_results.main([str(tmp_path / 'no_ids.npz'), '--out-dir', str(tmp_path / 's')])
    with pytest.raises(SystemExit, match='--data-root'):
        browse_results.main([out, '--out-dir', str(tmp_path / 's'), '--data-root',
                             str(tmp_path)])
    with pytest.raises(SystemExit, match='none.npz: no such embeddings file'):
        browse_results.main([str(tmp_path / 'none.npz'), '--out-dir', str(tmp_path / 's')])


@pytest.mark.slow
def test_query_gallery_set_shows_only_queries(tmp_path, in_root):
    out, show = str(tmp_path / 'r.npz'), str(tmp_path / 'show')
    test_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path / 'w'), '--out', out,
                    '--show-dir', show, '--cfg-options', *INSHOP])
    is_query = load_embeddings(out).is_query
    shown = sorted(int(r['query']) for r in read_csv(osp.join(show, 'failures.csv')))
    assert shown == np.flatnonzero(is_query).tolist()  # fewer queries than --show-num


@pytest.mark.slow
@pytest.mark.parametrize('method', ['pca', 'tsne'])
def test_plot_embeddings_writes_a_png(tested, tmp_path, method):
    from PIL import Image
    _, out, _ = tested
    png = tmp_path / f'{method}.png'
    points = plot_embeddings.main([out, '--method', method, '--out', str(png),
                                   '--thumbnails', '2'])
    assert points.shape == (len(np.load(out)['embeddings']), 2)
    with Image.open(png) as img:
        assert img.format == 'PNG' and img.width > 100


def test_plot_embeddings_umap_missing(tested, tmp_path, monkeypatch):
    _, out, _ = tested
    monkeypatch.setitem(sys.modules, 'umap', None)
    with pytest.raises(SystemExit, match=r'needs umap.*pip install "irtbox\[umap\]"'):
        plot_embeddings.main([out, '--method', 'umap', '--out', str(tmp_path / 'u.png')])


@pytest.mark.slow
def test_run_log_has_no_registry_scope_warning(tmp_path, in_root):
    work_dir = tmp_path / 'work'
    test_tool.main([TINY_CONFIG, '--work-dir', str(work_dir)])
    logs = glob.glob(str(work_dir / '*' / '*.log'))
    assert logs
    text = open(logs[0]).read()
    assert 'Iter(test)' in text  # the log is the run's
    assert 'Failed to search registry' not in text


@pytest.mark.slow
def test_revisited_junk_is_grey(tmp_path, in_root):
    """ROxford fixture, Hard protocol: positives = 'hard', junk = 'junk' + 'easy' (grey).

    The fixture (make_landmark_fixtures.py): 3 queries; a 16-image database with 4 views of
    each query's landmark, labelled easy / easy / hard / junk, and 4 unrelated images; 4 R1M
    distractors. With all 20 results shown, every query's row has its 1 hard view (green),
    2 easy + 1 junk (grey) and the 16 others (red), whatever the ranking."""
    import pickle
    from collections import Counter

    from PIL import Image

    from irtbox.visualization import COLORS
    from irtbox.visualization.grid import HEADER, PAD
    out = str(tmp_path / 'r.npz')
    test_tool.main([osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_landmarks.py'),
                    '--work-dir', str(tmp_path / 'w'), '--out', out])
    gnd_file = osp.join(ROOT, 'tests', 'data', 'landmarks', 'roxford5k', 'gnd_roxford5k.pkl')
    records = browse_results.main([out, '--out-dir', str(tmp_path / 'show'), '--gnd', gnd_file,
                                   '--protocol', 'hard', '--topk', '20'])
    with open(gnd_file, 'rb') as f:
        gnd = pickle.load(f)['gnd']
    saved = load_embeddings(out, '')  # the whitened set; the raw embeddings under their tag
    assert len(load_embeddings(out, 'no_whitening')) == len(saved)
    is_query = saved.is_query
    queries, database = np.flatnonzero(is_query), np.flatnonzero(~is_query)
    assert (len(queries), len(database)) == (3, 16 + 4)
    assert sorted(rec['query'] for rec in records) == queries.tolist()
    for rec in records:
        g = gnd[int(np.searchsorted(queries, rec['query']))]
        grid = np.asarray(Image.open(tmp_path / 'show' / 'grids' / f"query_{rec['query']}.png"))
        assert sorted(rec['results']) == database.tolist()
        seen = Counter()
        for j, sample in enumerate(rec['results'], start=1):
            db = int(np.searchsorted(database, sample))
            want = 'junk' if db in list(g['junk']) + list(g['easy']) else \
                'correct' if db in g['hard'] else 'wrong'
            seen[want] += 1
            x, y = PAD + j * (128 + 10 + PAD), HEADER + PAD
            assert tuple(grid[y + 1, x + 1]) == COLORS[want]
        assert seen == dict(correct=1, junk=3, wrong=16)


def test_browse_results_asks_for_a_set(tmp_path):
    save_embeddings(str(tmp_path / 'two.npz'), {'0': EmbeddingSet(np.ones((3, 2))),
                                                '1': EmbeddingSet(np.ones((3, 2)))})
    with pytest.raises(SystemExit, match=r'^--set: .*two.npz holds 2 sets of embeddings '
                                         r'\(0, 1\): name one'):
        browse_results.main([str(tmp_path / 'two.npz'), '--out-dir', str(tmp_path / 's')])
    with pytest.raises(SystemExit, match=r"two.npz \(set '1'\): no image paths"):
        browse_results.main([str(tmp_path / 'two.npz'), '--out-dir', str(tmp_path / 's'),
                             '--set', '1'])
