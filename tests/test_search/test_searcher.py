"""ImageSearcher on embeddings: exact and approximate search, save/load (the rows as one
embeddings file), crash safety, a full disk, the digests that
refuse an edited or damaged index, the model's identity computed lazily."""
import errno
import hashlib
import json
import os
import os.path as osp
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

from irtbox.evaluation.functional import knn
from irtbox.evaluation.neighbours.index import HOLDER_FILE, LOCK_FILE
from irtbox.search import ImageSearcher, IndexIntegrityError, IndexMismatchError
from irtbox.search import searcher as searcher_module
from irtbox.structures import EmbeddingSet, load_embeddings, save_embeddings

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def clustered(n=2000, d=32, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((40, d))
    x = centers[rng.integers(0, 40, n)] + 0.3 * rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_exact_search_equals_knn():
    x = clustered()
    searcher = ImageSearcher()
    searcher.add(x[:1500], ids=[f'img{i}' for i in range(1500)])
    searcher.add(x[1500:], ids=[f'img{i}' for i in range(1500, 2000)])
    sims, idx = knn(x[:50], x, 7)
    hits = searcher.search(x[:50], k=7)
    for row, (s, i) in enumerate(zip(sims, idx)):
        assert [h.id for h in hits[row]] == [f'img{j}' for j in i]
        np.testing.assert_allclose([h.score for h in hits[row]], s, atol=1e-5)
        assert [h.rank for h in hits[row]] == list(range(1, 8))
    single = searcher.search(x[3], k=2)
    assert single[0].id == 'img3' and single[0].position == 3
    assert searcher.recall_vs_exact(k=10) == 1.0


def test_unnormalised_embeddings_search_by_cosine():
    x = clustered(200)
    scaled = x * np.random.default_rng(1).uniform(0.1, 10, (200, 1)).astype(np.float32)
    searcher = ImageSearcher()
    searcher.add(scaled)
    assert [h.id for h in searcher.search(x[:5], k=3)[0]] == [
        h.id for h in ImageSearcher.search(_flat(x), x[:5], k=3)[0]]


def _flat(x):
    searcher = ImageSearcher()
    searcher.add(x)
    return searcher


def test_ivf_recall_and_training_errors():
    x = clustered()
    ivf = ImageSearcher(factory='IVF32,Flat', nprobe=4)
    ivf.add(x)
    recall = ivf.recall_vs_exact(k=10, num_queries=300)
    # An independent recount: the fraction of exact neighbours that the index returns.
    _, exact = knn(x[:300], x, 10)
    got = ivf.search(x[:300], k=10)
    mine = np.mean([len({h.position for h in g} & set(e)) / 10 for g, e in zip(got, exact)])
    assert 0.5 < recall <= 1.0 and 0.5 < mine <= 1.0
    with pytest.raises(ValueError, match='needs at least 4096 vectors to train, got 2000'):
        ImageSearcher(factory='IVF4096,Flat').add(x)
    with pytest.raises(ValueError, match="faiss cannot build index 'Nonsense'"):
        ImageSearcher(factory='Nonsense').add(x)


def test_bad_adds_and_queries():
    searcher = ImageSearcher()
    with pytest.raises(ValueError, match='empty'):
        searcher.search(np.zeros(8, np.float32))
    searcher.add(clustered(10, 8), ids=list('abcdefghij'))
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        searcher.add(clustered(1, 8), ids=['a'])
    with pytest.raises(ValueError, match=r"repeated: \['x'\]"):
        searcher.add(clustered(2, 8), ids=['x', 'x'])
    with pytest.raises(ValueError, match='16-d embeddings, the index holds 8-d'):
        searcher.add(clustered(2, 16), ids=['y', 'z'])
    with pytest.raises(ValueError, match='k must be a positive integer'):
        searcher.search(np.zeros(8, np.float32), k=0)
    with pytest.raises(ValueError, match='needs a model'):
        searcher.search('some.jpg')
    assert len(searcher.search(np.ones(8, np.float32), k=50)) == 10  # k bounded by the size


@pytest.mark.slow
# PQ without faiss's polysemous training (np), as irtbox's own plans build it: with it, the
# training of the 8-bit codes takes 7 s of CPU at this size.
@pytest.mark.parametrize('factory', ['Flat', 'IVF16,Flat', 'HNSW16', 'IVF8,PQ4np'])
def test_save_load_same_results(factory, tmp_path):
    x = clustered(1500, 16)
    searcher = ImageSearcher(factory=factory)
    searcher.add(x, ids=[f'p/{i}.jpg' for i in range(len(x))])
    before = searcher.search(x[:20], k=5)
    searcher.save(str(tmp_path / 'idx'))
    loaded = ImageSearcher.load(str(tmp_path / 'idx'))
    assert loaded.search(x[:20], k=5) == before and loaded.ids == searcher.ids
    assert loaded.factory == factory and loaded.dim == 16


@pytest.mark.slow
def test_the_rows_are_one_embeddings_file_read_memory_mapped(tmp_path):
    """manifest.json (format 2) names embeddings-<tag>.npz: embeddings, ids, identity; the
    embeddings come back as a read-only memory map, and search as before."""
    x = clustered(20000, 16)  # 1.3 MB of embeddings: memory-mapped
    searcher = ImageSearcher()
    searcher.add(x, ids=[f'p/{i}.jpg' for i in range(len(x))])
    folder = str(tmp_path / 'idx')
    searcher.save(folder)
    with open(osp.join(folder, 'manifest.json')) as f:
        manifest = json.load(f)
    assert manifest['format_version'] == 2 and 'ids' not in manifest
    assert 'identity' not in manifest
    assert {k: manifest[k] for k in ('factory', 'dim', 'count', 'nprobe')} == dict(
        factory='Flat', dim=16, count=20000, nprobe=None)
    name = manifest['files']['embeddings']
    assert name.startswith('embeddings-') and name.endswith('.npz')
    rows = load_embeddings(osp.join(folder, name))
    assert rows.ids == searcher.ids and rows.identity is None
    np.testing.assert_allclose(rows.embeddings, searcher.embeddings)
    loaded = ImageSearcher.load(folder)
    assert isinstance(loaded.embeddings, np.memmap) and not loaded.embeddings.flags.writeable
    assert loaded.search(x[:5], k=3) == searcher.search(x[:5], k=3)
    loaded.add(clustered(3, 16, seed=9), ids=['a', 'b', 'c'])  # a memory map grows as a copy
    assert len(loaded) == 20003 and loaded.search(loaded.embeddings[-1], k=1)[0].id == 'c'


def test_an_unknown_format_or_a_short_manifest_is_a_clear_error(tmp_path):
    folder = str(tmp_path / 'idx')
    _flat(clustered(10, 8)).save(folder)
    path = osp.join(folder, 'manifest.json')
    with open(path) as f:
        manifest = json.load(f)
    with open(path, 'w') as f:
        json.dump(dict(manifest, format_version=3), f)
    with pytest.raises(ValueError, match=r'index format 3, this irtbox reads format 2: '
                                         'rebuild the index'):
        ImageSearcher.load(folder)
    with open(path, 'w') as f:
        json.dump(dict(manifest, files=dict(index=manifest['files']['index'])), f)
    with pytest.raises(ValueError, match=r'manifest.json: no files.embeddings; expected'):
        ImageSearcher.load(folder)
    with open(path, 'w') as f:
        json.dump({k: v for k, v in manifest.items() if k != 'sha256'}, f)
    with pytest.raises(ValueError, match=r'manifest.json: no sha256; expected'):
        ImageSearcher.load(folder)


def test_non_finite_embeddings_are_refused():
    x = clustered(10, 8)
    x[3, 2], x[6, 0] = np.nan, np.inf
    searcher = ImageSearcher()
    with pytest.raises(ValueError, match=r"2 of 10 embeddings are not finite \(NaN or inf\): "
                                         r"\['d', 'g'\]"):
        searcher.add(x, ids=list('abcdefghij'))
    assert len(searcher) == 0 and searcher.index is None


def test_resave_replaces_files_and_refuses_other_folders(tmp_path):
    searcher = _flat(clustered(100, 8))
    folder = str(tmp_path / 'idx')
    searcher.save(folder)
    first = set(os.listdir(folder)) - {LOCK_FILE}
    searcher.add(clustered(5, 8, seed=3), ids=[f'new{i}' for i in range(5)])
    searcher.save(folder)
    second = set(os.listdir(folder)) - {LOCK_FILE}
    assert len(first) == len(second) == 3 and first & second == {'manifest.json'}
    assert len(ImageSearcher.load(folder)) == 105
    with pytest.raises(FileNotFoundError, match='not an irtbox index'):
        ImageSearcher.load(str(tmp_path))


@pytest.mark.slow
def test_killed_save_leaves_the_old_index(tmp_path):
    """kill -9 at the worst moment (new data files written, manifest about to be replaced):
    the old index still loads and gives the old results."""
    folder = str(tmp_path / 'idx')
    x = clustered(300, 8)
    old = _flat(x[:200])
    old.save(folder)
    expected = old.search(x[:10], k=5)
    code = f'''
        import os, signal, numpy as np
        from irtbox.search import ImageSearcher
        searcher = ImageSearcher.load({folder!r})
        searcher.add(np.load({str(tmp_path / 'more.npy')!r}), ids=[f'n{{i}}' for i in range(100)])
        real_replace = os.replace
        def replace(src, dst):
            if dst.endswith('manifest.json'):
                os.kill(os.getpid(), signal.SIGKILL)
            real_replace(src, dst)
        os.replace = replace
        searcher.save({folder!r})
    '''
    np.save(str(tmp_path / 'more.npy'), x[200:])
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=ROOT)
    assert result.returncode == -9
    # The killed save did write its data files (its lock's holder record stays too).
    assert len(set(os.listdir(folder)) - {LOCK_FILE, HOLDER_FILE}) > 3
    reloaded = ImageSearcher.load(folder)
    assert len(reloaded) == 200 and reloaded.search(x[:10], k=5) == expected
    reloaded.save(folder)  # the next save removes what the killed one left
    assert len(set(os.listdir(folder)) - {LOCK_FILE}) == 3
    assert len(ImageSearcher.load(folder)) == 200


class _Forbidden(torch.nn.Module):
    """Stands for the forward of a model that must not run."""

    def forward(self, *args, **kwargs):
        raise AssertionError('the model ran')


@pytest.mark.slow
def test_constructing_runs_no_forward_and_the_identity_is_computed_once(tmp_path, monkeypatch):
    """ImageSearcher(model) neither runs the model nor hashes its weights: its identity is
    computed the first time it is needed (the dimension of an empty searcher, save), once."""
    from irtbox.apis import init_model
    model = init_model(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'))
    calls = []
    real_identity = searcher_module.model_identity
    monkeypatch.setattr(searcher_module, 'model_identity',
                        lambda m: calls.append(m) or real_identity(m))
    real_forward = model.forward
    model.forward = _Forbidden().forward
    searcher = ImageSearcher(model, factory='Flat')
    assert calls == [] and searcher.model is model
    model.forward = real_forward
    assert searcher.dim == 32 and len(calls) == 1  # the dimension of an empty searcher
    searcher.add(clustered(20, 32))
    searcher.save(str(tmp_path / 'idx'))
    searcher.save(str(tmp_path / 'idx'))
    assert len(calls) == 1 and searcher.identity['embedding_dim'] == 32
    # One given (as build_index passes the extraction's) is never recomputed.
    given = ImageSearcher(model, identity=dict(searcher.identity))
    given.add(clustered(20, 32))
    given.save(str(tmp_path / 'given'))
    assert len(calls) == 1
    assert load_embeddings(osp.join(tmp_path / 'given', json.load(open(
        tmp_path / 'given' / 'manifest.json'))['files']['embeddings'])).identity == \
        searcher.identity


@pytest.mark.slow
def test_model_mismatch_is_refused(tmp_path):
    from irtbox.apis import init_model
    tiny = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
    model = init_model(tiny)
    searcher = ImageSearcher(model)
    searcher.add(clustered(20, 32))
    searcher.save(str(tmp_path / 'idx'))
    assert len(ImageSearcher.load(str(tmp_path / 'idx'), model=model)) == 20
    other = init_model(tiny)  # other random weights
    with pytest.raises(IndexMismatchError, match='model weights: index'):
        ImageSearcher.load(str(tmp_path / 'idx'), model=other)
    wide = init_model(tiny, cfg_options={'model.backbone.embed_dim': 16})
    with pytest.raises(IndexMismatchError, match='embedding dimension: index 32 vs model 16'):
        ImageSearcher.load(str(tmp_path / 'idx'), model=wide)


def saved(tmp_path, n=40):
    """An index folder of n embeddings with ids p/<i>.jpg, its manifest and the embeddings."""
    x = clustered(n, 8)
    searcher = ImageSearcher()
    searcher.add(x, ids=[f'p/{i}.jpg' for i in range(n)])
    folder = str(tmp_path / 'idx')
    searcher.save(folder)
    with open(osp.join(folder, 'manifest.json')) as f:
        return folder, json.load(f), x


def test_the_manifest_records_the_sha256_of_every_file(tmp_path):
    import hashlib
    folder, manifest, _ = saved(tmp_path)
    assert sorted(manifest['sha256']) == sorted(manifest['files'].values())
    for name, digest in manifest['sha256'].items():
        with open(osp.join(folder, name), 'rb') as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest


@pytest.mark.parametrize('edit', ['ids reversed', 'embeddings reversed'])
def test_an_edited_index_is_refused_naming_the_file(tmp_path, edit):
    """Rows reordered in the embeddings file: before the digests, a query returned the wrong
    file at score 1.000; now loading refuses, naming the file and saying to rebuild."""
    folder, manifest, x = saved(tmp_path)
    path = osp.join(folder, manifest['files']['embeddings'])
    rows = load_embeddings(path)
    ids, embeddings = list(rows.ids), np.array(rows.embeddings)
    if edit == 'ids reversed':
        ids = ids[::-1]
    else:
        embeddings = embeddings[::-1].copy()
    save_embeddings(path, EmbeddingSet(embeddings, ids=ids, identity=rows.identity))
    with pytest.raises(IndexIntegrityError) as info:
        ImageSearcher.load(folder)
    message = str(info.value)
    assert message.startswith(f'{path}: its sha256 is not the one manifest.json records')
    assert message.endswith('rebuild the index') and '\n' not in message


def test_a_truncated_faiss_file_is_one_line_naming_it(tmp_path):
    folder, manifest, x = saved(tmp_path, n=400)
    path = osp.join(folder, manifest['files']['index'])
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(IndexIntegrityError, match=rf'^{path}: its sha256 is not the one'):
        ImageSearcher.load(folder)
    # Digests that match a file faiss cannot read: faiss's own error, as one line naming it.
    manifest['sha256'][manifest['files']['index']] = hashlib.sha256(
        data[:len(data) // 2]).hexdigest()
    with open(osp.join(folder, 'manifest.json'), 'w') as f:
        json.dump(manifest, f)
    with pytest.raises(IndexIntegrityError) as info:
        ImageSearcher.load(folder)
    message = str(info.value)
    assert message.startswith(f'{path}: not a readable faiss index (faiss: read error in ')
    assert message.endswith('damaged or cut short: rebuild the index')
    assert '\n' not in message and '.cpp' not in message


def test_a_missing_file_or_a_manifest_without_digests_is_refused(tmp_path):
    folder, manifest, x = saved(tmp_path)
    index = osp.join(folder, manifest['files']['index'])
    os.rename(index, index + '.moved')
    with pytest.raises(IndexIntegrityError, match=rf'{index} is missing \(manifest.json names '
                                                  r'it\): rebuild the index'):
        ImageSearcher.load(folder)
    os.rename(index + '.moved', index)
    # A manifest without the digests: nothing could be checked.
    with open(osp.join(folder, 'manifest.json'), 'w') as f:
        json.dump({k: v for k, v in manifest.items() if k != 'sha256'}, f)
    with pytest.raises(IndexIntegrityError, match=r'manifest.json: no sha256; expected a '
                                                  r'manifest written by ImageSearcher.save'):
        ImageSearcher.load(folder)


@pytest.mark.parametrize('failing', ['index', 'embeddings'])
def test_a_full_disk_during_save_leaves_the_folder_as_it_was(tmp_path, monkeypatch, failing):
    """A write that fails half-way with ENOSPC: an OSError naming the file; no part, no
    orphan of the failed save is left, and the earlier index loads as before."""
    import faiss
    folder, manifest, x = saved(tmp_path)
    before = sorted(os.listdir(folder))
    from irtbox.structures import embeddings_file
    write_index, atomic_write = faiss.write_index, embeddings_file.atomic_write

    def half_then_full(write):
        def failing_write(*args, **kwargs):
            write(*args, **kwargs)
            target = args[-1] if failing == 'index' else args[0]
            name = target if isinstance(target, str) else target.name
            with open(name, 'r+b') as f:
                f.truncate(os.path.getsize(name) // 2)
            if failing == 'index':  # as faiss says it
                raise RuntimeError(f"Error in void faiss::write_index(const Index*, IOWriter*, "
                                   f"int) at index_write.cpp:499: Error: 'ret == (size * 4)' "
                                   f"failed: write error in {name}: 4051 != 160000 (No space "
                                   "left on device)")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return failing_write
    if failing == 'index':
        monkeypatch.setattr(faiss, 'write_index', half_then_full(write_index))
    else:  # the embeddings file's writer, inside its atomic write
        monkeypatch.setattr(embeddings_file, 'atomic_write', lambda path, write: atomic_write(
            path, half_then_full(write) if 'embeddings-' in osp.basename(path) else write))
    searcher = ImageSearcher.load(folder)
    searcher.add(clustered(5, 8, seed=4), ids=[f'new{i}' for i in range(5)])
    kind = 'index-' if failing == 'index' else 'embeddings-'
    with pytest.raises(OSError, match=rf'No space left on device.*: cannot write '
                                      rf'{folder}/{kind}\w+\.(faiss|npz) \(nothing was '
                                      'written') as info:
        searcher.save(folder)
    assert info.value.errno == errno.ENOSPC
    assert sorted(os.listdir(folder)) == before  # no temporary file, no orphan
    monkeypatch.undo()
    assert ImageSearcher.load(folder).ids == [f'p/{i}.jpg' for i in range(len(x))]


def _overwrite(path, change):
    """Change ``path`` as ``cp`` or a truncation does: in place (the same inode), or replace
    it by a rename (another inode)."""
    with open(path, 'rb') as f:
        data = f.read()
    time.sleep(0.02)  # past the file system's timestamp granularity: a new mtime
    if change == 'replaced':
        with open(path + '.new', 'wb') as f:
            f.write(data)
        os.replace(path + '.new', path)
        return
    with open(path, 'r+b') as f:  # 'cp new old' writes the old inode
        if change == 'cut short':
            f.truncate(len(data) // 2)
        else:
            f.write(bytes(255 - b for b in data[:64]))


@pytest.mark.parametrize('key', ['index', 'embeddings'])
@pytest.mark.parametrize('change', ['written over', 'cut short', 'replaced'])
def test_a_file_changed_under_a_loaded_index_is_an_error_naming_it(tmp_path, key, change):
    """Issue 48 item 3: a loaded index's file written over or cut short in place (a mapped
    IVF list file then ended the server with SIGBUS; a rows file gave wrong rows) or replaced:
    the next search is refused, naming the file, before anything reads it."""
    from irtbox.evaluation.neighbours.index import IndexFileChangedError
    folder, manifest, x = saved(tmp_path)
    searcher = ImageSearcher.load(folder)
    path = osp.join(folder, manifest['files'][key])
    _overwrite(path, change)
    with pytest.raises(IndexFileChangedError) as info:
        searcher.search(x[:2], k=3)
    assert isinstance(info.value, OSError) and info.value.path == path
    assert str(info.value).startswith(f'{path} changed since the index was loaded (')
    assert '\n' not in str(info.value)


def test_a_new_save_into_a_loaded_index_folder_leaves_it_searching(tmp_path):
    """The safe way to replace an index: a save writes new files and removes the old ones; an
    index loaded before keeps its files (removed, not changed) and answers as before."""
    folder, _, x = saved(tmp_path)
    searcher = ImageSearcher.load(folder)
    before = searcher.search(x[:3], k=4)
    other = ImageSearcher()
    other.add(clustered(30, 8, seed=5), ids=[f'q/{i}.jpg' for i in range(30)])
    other.save(folder)
    assert searcher.search(x[:3], k=4) == before
    assert ImageSearcher.load(folder).ids[0] == 'q/0.jpg'


MAPPED_CUT_SHORT = textwrap.dedent('''
    import sys
    import numpy as np
    from irtbox.search import ImageSearcher
    folder, path = sys.argv[1:]
    searcher = ImageSearcher.load(folder)
    with open(path, 'r+b') as f:
        f.truncate(4096)
    try:
        searcher.search(np.ones((1, 8), np.float32), k=3)
    except OSError as err:
        print(type(err).__name__, err)
''')


@pytest.mark.slow
def test_a_mapped_index_cut_short_is_an_error_not_a_bus_error(tmp_path):
    """The probe itself: an IVF index's lists mapped in place (IO_FLAG_MMAP_IFC), the file cut
    short: before, the process died of SIGBUS; now the search is refused naming the file."""
    searcher = ImageSearcher(factory='IVF4,Flat')
    searcher.add(clustered(4000, 8), ids=[str(i) for i in range(4000)])
    folder = str(tmp_path / 'idx')
    searcher.save(folder)
    with open(osp.join(folder, 'manifest.json')) as f:
        path = osp.join(folder, json.load(f)['files']['index'])
    done = subprocess.run([sys.executable, '-c', MAPPED_CUT_SHORT, folder, path],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1].startswith(
        f'IndexFileChangedError {path} changed since the index was loaded (written over in '
        'place: ')
