"""tools/search.py build / query as a user runs them on a folder of their own images."""
import errno
import json
import os
import os.path as osp
import re
import shutil
from urllib.request import url2pathname

import numpy as np
import pytest
import torch

from irtbox.apis import extract_features, init_model, list_images
from irtbox.evaluation.neighbours.index import HOLDER_FILE, LOCK_FILE
from irtbox.search import ImageSearcher
from irtbox.cli import search as search_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')


@pytest.fixture(scope='module')
def photos(tmp_path_factory, digits_root):
    """A user's folder: 100 digit PNGs in sub-folders, one corrupt file, one text file."""
    root = tmp_path_factory.mktemp('user')
    folder = root / 'photos'
    for digit in range(5, 10):
        (folder / f'album{digit}').mkdir(parents=True)
        source = digits_root / 'test' / str(digit)
        for name in sorted(os.listdir(source))[:20]:
            shutil.copy(source / name, folder / f'album{digit}' / name)
    (folder / 'album5' / 'broken.png').write_bytes(b'\x89PNG\r\n\x1a\n' + b'\x00' * 40)
    (folder / 'notes.txt').write_text('not an image')
    torch.manual_seed(0)
    checkpoint = str(root / 'model.pth')
    torch.save({'state_dict': init_model(CONFIG).state_dict()}, checkpoint)
    return str(folder), checkpoint


@pytest.fixture
def renamed_onto(monkeypatch):
    """The files written by a rename onto them (atomic_write) from now on."""
    targets, replace = [], os.replace

    def spy(src, dst):
        targets.append(os.fspath(dst))
        return replace(src, dst)
    monkeypatch.setattr(os, 'replace', spy)
    return targets


def test_a_hit_is_shown_as_a_path_that_opens_from_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert search_tool.shown_path(str(tmp_path / 'a' / 'b.png')) == osp.join('a', 'b.png')
    assert search_tool.shown_path('/elsewhere/b.png') == '/elsewhere/b.png'


@pytest.mark.slow
def test_build_then_query(photos, tmp_path, capsys, monkeypatch, renamed_onto):
    folder, checkpoint = photos
    index = str(tmp_path / 'index')
    import irtbox.apis.extract as extract_module
    import irtbox.apis.identity as identity_module
    import irtbox.search.searcher as searcher_module
    identities, model_identity = [], identity_module.model_identity
    for module in (identity_module, searcher_module, extract_module):
        monkeypatch.setattr(module, 'model_identity',
                            lambda m: identities.append(1) or model_identity(m))
    # Built as a user does, with paths relative to the folder of the photos and the model ...
    monkeypatch.chdir(osp.dirname(folder))
    searcher = search_tool.main(['build', CONFIG, osp.basename(checkpoint), osp.basename(folder),
                                 index, '--batch-size', '16', '--num-workers', '0',
                                 '--shard-size', '32'])
    assert len(searcher) == 100 and not osp.exists(osp.join(index, 'build'))
    assert len(identities) == 1  # one forward and one hash of the weights per build
    # Every file of the index folder arrived whole, by a rename.
    lock = {LOCK_FILE, HOLDER_FILE}  # the build's lock and its holder's record aside
    assert sorted(set(os.listdir(index)) - lock) == sorted(
        osp.basename(t) for t in renamed_onto if osp.dirname(t) == index
        and osp.basename(t) not in lock)
    assert {'failed.json', 'manifest.json'} <= set(os.listdir(index))
    with open(osp.join(index, 'failed.json')) as f:
        failed = json.load(f)
    assert [osp.basename(f['path']) for f in failed] == ['broken.png']
    assert 'indexed 100 images' in capsys.readouterr().out

    model = init_model(CONFIG, checkpoint)
    query = osp.join(folder, 'album7', sorted(os.listdir(osp.join(folder, 'album7')))[3])
    monkeypatch.chdir(tmp_path)  # ... and queried from another folder
    out = str(tmp_path / 'results.json')
    results = search_tool.main(['query', index, query, '--k', '5', '--out', out])
    with open(out) as f:
        assert json.load(f) == results
    assert renamed_onto[-1] == out
    hits = results[0]['hits']
    assert hits[0]['path'] == query and hits[0]['score'] > 0.999
    assert hits[0]['id'] == osp.relpath(query, osp.dirname(folder))  # as the build named it
    # The same ranking as an exact search over embeddings extracted independently.
    everything = extract_features(model, folder, progress=False)
    q = extract_features(model, [query], progress=False).embeddings[0]
    order = np.argsort(-(everything.embeddings @ q), kind='stable')[:5]
    assert [h['path'] for h in hits] == [everything.ids[i] for i in order]
    # --rerank: the index's shortlist re-ranked by SuperGlobal, as on the extracted rows.
    from irtbox.evaluation.functional import rerank_search
    reranked = search_tool.main(['query', index, query, '--k', '5', '--rerank', 'superglobal'])
    order = rerank_search(dict(type='superglobal'), q[None], everything.embeddings)[0][0, :5]
    assert [h['path'] for h in reranked[0]['hits']] == [everything.ids[i] for i in order]
    html = str(tmp_path / 'results.html')
    search_tool.main(['query', index, query, '--k', '3', '--out', html])
    text = open(html).read()
    assert text.count('<figure') == 4 and 'album7/' + osp.basename(query) in text  # its class
    # The page's images are the indexed files, wherever the page was written from.
    sources = re.findall(r'<img src="file:([^"]+)"', text)
    assert len(sources) == 4 and all(osp.isfile(url2pathname(s)) for s in sources)
    assert renamed_onto[-1] == html
    # A file that really moved: the query says which.
    shutil.move(hits[1]['path'], str(tmp_path / 'moved.png'))
    try:
        capsys.readouterr()
        search_tool.main(['query', index, query, '--k', '3'])
        printed = capsys.readouterr().out
        assert f'e.g. {hits[1]["path"]}; rebuild' in printed
        # Queried from another folder: each hit printed as a path that opens from here.
        assert f'    1  {hits[0]["score"]:.4f}  {query}\n' in printed
    finally:
        shutil.move(str(tmp_path / 'moved.png'), hits[1]['path'])


@pytest.mark.slow
def test_resume_continues_from_the_shards(photos, tmp_path, monkeypatch, request):
    folder, checkpoint = photos
    index = str(tmp_path / 'index')
    args = ['build', CONFIG, checkpoint, folder, index, '--num-workers', '0', '--shard-size', '40']
    import irtbox.search.searcher as searcher_module
    monkeypatch.setattr(searcher_module.ImageSearcher, 'add', lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # dies after embedding, before indexing
        search_tool.main(args)
    shards = sorted(os.listdir(osp.join(index, 'build', 'shards')))
    assert len(shards) == 3
    os.remove(osp.join(index, 'build', 'shards', shards[1]))
    monkeypatch.undo()
    with pytest.raises(SystemExit, match='--resume'):
        search_tool.main(args)
    embedded = request.getfixturevalue('embedded_items')
    searcher = search_tool.main(args + ['--resume'])
    paths = list_images(folder)
    assert embedded == paths[40:80]  # only the deleted shard is embedded again
    assert len(searcher) == 100 and ImageSearcher.load(index).ids == searcher.ids


@pytest.mark.slow
def test_query_with_another_model_is_refused(photos, tmp_path):
    folder, checkpoint = photos
    index = str(tmp_path / 'index')
    search_tool.main(['build', CONFIG, checkpoint, folder, index, '--num-workers', '0'])
    other = str(tmp_path / 'other.pth')
    torch.manual_seed(5)
    torch.save(init_model(CONFIG).state_dict(), other)
    with pytest.raises(SystemExit, match='built by another model.*model weights'):
        search_tool.main(['query', index, __file__, '--checkpoint', other])
    moved = str(tmp_path / 'moved.pth')
    shutil.move(checkpoint, moved)
    try:
        with pytest.raises(SystemExit, match=f'checkpoint {checkpoint}, which is not there any '
                           r'more \(moved or deleted\); pass --checkpoint'):
            search_tool.main(['query', index, __file__])
    finally:
        shutil.move(moved, checkpoint)


@pytest.mark.slow
def test_approximate_index_prints_its_recall(photos, tmp_path, capsys):
    folder, checkpoint = photos
    index = str(tmp_path / 'index')
    searcher = search_tool.main(['build', CONFIG, checkpoint, folder, index, '--factory',
                                 'IVF4,Flat', '--num-workers', '0'])
    assert searcher.factory == 'IVF4,Flat'
    assert 'recall@10 of the approximate index vs exact search' in capsys.readouterr().out
    assert ImageSearcher.load(index).factory == 'IVF4,Flat'


def test_the_library_errors_are_worded_for_the_flags():
    """The library names values (k, device='cpu', rebuild the index); the command its flags."""
    from irtbox.evaluation.neighbours.faiss_index import GpuTopKError
    from irtbox.search import IndexIntegrityError
    assert search_tool._worded_for_flags(GpuTopKError(2049)) == (
        'faiss on the GPU returns at most 2048 hits per query, got --k 2049; ask for fewer or '
        'search on the CPU (--device cpu)')
    damaged = IndexIntegrityError('idx/index-a.faiss', 'idx/index-a.faiss: ...: rebuild the index')
    assert search_tool._worded_for_flags(damaged).endswith(
        'rebuild the index with tools/search.py build')


@pytest.mark.slow
@pytest.mark.parametrize('argv, message', [
    (['query', 'nowhere', 'x.png'], "INDEX_DIR: folder not found: 'nowhere'"),
    (['query', '.', CONFIG], 'not an irtbox index'),  # a file: the folder is read first
    (['build', CONFIG, 'none', 'no_such_folder', 'idx'], 'IMAGE_DIR: folder not found'),
])
def test_bad_input(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=message):
        search_tool.main(argv)


@pytest.mark.slow
def test_a_full_disk_during_build_leaves_no_half_written_file(photos, tmp_path, monkeypatch):
    """ENOSPC half-way through writing a shard, then the index's embeddings file: each time
    an OSError naming the file, no part or orphan left; the shards written so far are kept,
    and --resume (once there is room) finishes the index."""
    folder, checkpoint = photos
    index = str(tmp_path / 'index')
    args = ['build', CONFIG, checkpoint, folder, index, '--num-workers', '0', '--shard-size', '40']
    from irtbox.structures import embeddings_file
    atomic_write, full = embeddings_file.atomic_write, {'name': None}

    def write_on_a_full_disk(path, write):
        def half_written(tmp):
            write(tmp)
            if full['name'] and full['name'] in osp.basename(path):
                os.truncate(tmp, os.path.getsize(tmp) // 2)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return atomic_write(path, half_written)
    monkeypatch.setattr(embeddings_file, 'atomic_write', write_on_a_full_disk)

    def every_file():
        return sorted(osp.relpath(osp.join(d, n), index) for d, _, names in os.walk(index)
                      for n in names)
    full['name'] = 'shard_000001'
    # One line, not a traceback: the command exits with the message.
    with pytest.raises(SystemExit, match=r'^search build: .*No space left on device: cannot '
                                         rf'write {index}/build/shards/shard_000001.npz'):
        search_tool.main(args)
    assert [f for f in every_file() if 'shard_' in f] == ['build/shards/shard_000000.npz']
    assert not any('.tmp' in f or f == 'manifest.json' for f in every_file())
    full['name'] = 'embeddings-'
    with pytest.raises(SystemExit, match=rf'No space left on device: cannot write {index}/'
                                      r'embeddings-\w+\.npz .*The embedded images are kept in '
                                      rf'{index}/build: make room and run the same command with '
                                      '--resume'):
        search_tool.main(args + ['--resume'])
    # Nothing of the index, no part (the lock, held by the build, aside).
    assert all(f.startswith('build/') or f == LOCK_FILE for f in every_file())
    assert [f for f in every_file() if 'shard_' in f] == [
        f'build/shards/shard_00000{i}.npz' for i in range(3)]
    full['name'] = None
    searcher = search_tool.main(args + ['--resume'])
    assert len(searcher) == 100 and ImageSearcher.load(index).ids == searcher.ids
    assert not osp.exists(osp.join(index, 'build'))


@pytest.mark.slow
def test_build_without_a_checkpoint_of_random_weights_is_refused(photos, tmp_path):
    # Before: the whole index was built, then every query refused ("index ... built by another
    # model"): random weights are another model at every start.
    folder, _ = photos
    index = tmp_path / 'index'
    with pytest.raises(SystemExit, match=r'search build: .*: checkpoint none, and backbone has '
                       'random weights .* no query could use this index'):
        search_tool.main(['build', CONFIG, 'none', folder, str(index), '--num-workers', '0'])
    assert not (index / 'manifest.json').exists()


def test_rerank_graph_flag_names_the_graph():
    from irtbox.cli.search import _rerank_cfg
    query = ['query', 'index', 'a.png', '--rerank']
    assert _rerank_cfg(search_tool.parse_args(query + ['diffusion', '--rerank-graph', 'ivf'])) \
        == dict(type='diffusion', graph=dict(method='ivf'))
    assert _rerank_cfg(search_tool.parse_args(query + ['kreciprocal'])) == dict(type='kreciprocal')
    assert _rerank_cfg(search_tool.parse_args(query + ['superglobal', '--rerank-graph', 'ivf'])) \
        == dict(type='superglobal')
