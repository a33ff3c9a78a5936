"""The embeddings file: one writer, one reader, memory-mapped, older files read."""
import json
import zipfile

import numpy as np
import pytest

from irtbox.structures.embeddings_file import (EMBEDDINGS_FORMAT, EmbeddingSet,
                                               embedding_set_names, load_embeddings,
                                               save_embeddings)


def make_set(n=600, dim=512, seed=0, **kwargs):
    rng = np.random.default_rng(seed)
    return EmbeddingSet(rng.standard_normal((n, dim)).astype(np.float32),
                        ids=[f'class{i % 7}/img{i}.jpg' for i in range(n)], **kwargs)


def test_round_trip_keeps_every_field(tmp_path):
    data = make_set(data_root='/data/sop', labels=np.arange(600) % 7,
                    is_query=np.arange(600) % 2 == 0, class_names=['a', 'b'],
                    failed=[('bad.jpg', 'OSError: truncated')], metrics={'recall@1': 81.5},
                    identity={'config': 'c.py', 'embedding_dim': 512},
                    extra={'sample_idx': np.arange(600)[::-1]})
    path = str(tmp_path / 'out.npz')
    save_embeddings(path, data)
    back = load_embeddings(path)
    np.testing.assert_array_equal(back.embeddings, data.embeddings)
    assert back.ids == list(data.ids) and back.data_root == '/data/sop'
    np.testing.assert_array_equal(back.labels, data.labels)
    np.testing.assert_array_equal(back.is_query, data.is_query)
    assert back.class_names == ['a', 'b'] and back.failed == data.failed
    assert back.metrics == {'recall@1': 81.5} and back.identity == data.identity
    np.testing.assert_array_equal(back.extra['sample_idx'], np.arange(600)[::-1])
    assert back.paths()[1] == '/data/sop/class1/img1.jpg'
    assert back.paths('/moved')[1] == '/moved/class1/img1.jpg'
    # Plain numpy reads it too, and it says what it is.
    with np.load(path) as raw:
        assert str(raw['format']) == EMBEDDINGS_FORMAT


def test_big_arrays_are_memory_mapped_not_read(tmp_path):
    path = str(tmp_path / 'big.npz')
    data = make_set(n=2000, dim=256)  # 2 MB: above the mapping threshold
    save_embeddings(path, data)
    back = load_embeddings(path)
    assert isinstance(back.embeddings, np.memmap) and not back.embeddings.flags.writeable
    np.testing.assert_array_equal(back.embeddings[1234], data.embeddings[1234])
    assert not isinstance(load_embeddings(path, mmap=False).embeddings, np.memmap)
    # Stored uncompressed (what makes the mapping possible).
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo('embeddings.npy').compress_type == zipfile.ZIP_STORED


def test_several_sets_by_name(tmp_path):
    path = str(tmp_path / 'multi.npz')
    first, second = make_set(n=5, dim=3, metrics={'a/r@1': 1.0}), make_set(
        n=4, dim=3, seed=1, metrics={'b/r@1': 2.0})
    save_embeddings(path, {'0': first, '1': second})
    assert embedding_set_names(path) == ['0', '1']
    back = load_embeddings(path, '1')
    np.testing.assert_array_equal(back.embeddings, second.embeddings)
    assert back.metrics == {'a/r@1': 1.0, 'b/r@1': 2.0}
    with pytest.raises(ValueError, match=r"holds 2 sets .*\(0, 1\): name one"):
        load_embeddings(path)
    with pytest.raises(ValueError, match=r"no set '2'.*'0', '1'"):
        load_embeddings(path, '2')


def test_empty_set_keeps_its_width(tmp_path):
    path = str(tmp_path / 'empty.npz')
    save_embeddings(path, EmbeddingSet(np.zeros((0, 8), np.float32), ids=[],
                                       failed=[('a.png', 'not an image')]))
    back = load_embeddings(path)
    assert back.embeddings.shape == (0, 8) and back.failed == [('a.png', 'not an image')]


def test_bad_files_name_the_file_and_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match='missing.npz'):
        load_embeddings(str(tmp_path / 'missing.npz'))
    junk = tmp_path / 'junk.npz'
    junk.write_bytes(b'not a zip')
    with pytest.raises(ValueError, match='junk.npz: not a readable .npz'):
        load_embeddings(str(junk))
    other = str(tmp_path / 'other.npz')
    np.savez(other, weights=np.zeros(3))
    with pytest.raises(ValueError, match=r"other.npz: no embeddings array \(has \['weights'\]"):
        load_embeddings(other)
    with pytest.raises(ValueError, match='3 labels for 2 embeddings'):
        save_embeddings(str(tmp_path / 'x.npz'), EmbeddingSet(np.zeros((2, 4), np.float32),
                                                              labels=np.arange(3)))
    assert not (tmp_path / 'x.npz').exists()


def test_identity_is_json(tmp_path):
    path = str(tmp_path / 'id.npz')
    save_embeddings(path, make_set(n=2, dim=2, identity={'weights_sha256': 'ab' * 32}))
    with np.load(path) as raw:
        assert json.loads(str(raw['identity']))['weights_sha256'] == 'ab' * 32


def test_a_memory_mapped_set_is_written_in_chunks_as_np_savez_writes_it(tmp_path, monkeypatch):
    """An index folder re-saves its memory-mapped embeddings (15 GB at 10M x 384): written a
    chunk at a time with the pages given back, the same arrays as np.savez's, and the
    writer's resident memory does not grow with the file."""
    import irtbox.structures.embeddings_file as embeddings_file
    from irtbox.utils.memory import peak_rss_mb, reset_peak
    rows = np.lib.format.open_memmap(str(tmp_path / 'rows.npy'), mode='w+', dtype=np.float32,
                                     shape=(96_000, 128))  # 48 MB
    rows[:] = np.random.default_rng(0).standard_normal(rows.shape[1], dtype=np.float32)
    rows[:, 0] = np.arange(len(rows))  # every row its own
    rows.flush()
    del rows
    mapped = np.load(str(tmp_path / 'rows.npy'), mmap_mode='r')
    data = EmbeddingSet(mapped, ids=None, labels=np.arange(len(mapped)) % 3,
                        identity={'config': 'c.py'})
    monkeypatch.setattr(embeddings_file, '_COPY_BYTES', 2 << 20, raising=False)
    before = reset_peak()
    save_embeddings(str(tmp_path / 'streamed.npz'), data)
    grown = peak_rss_mb() - before
    with open(tmp_path / 'reference.npz', 'wb') as f:
        np.savez(f, format=np.array(EMBEDDINGS_FORMAT), embeddings=np.asarray(mapped),
                 labels=data.labels, data_root=np.array(''),
                 failed_ids=np.array([], dtype=str), failed_reasons=np.array([], dtype=str),
                 identity=np.array(json.dumps(data.identity)))
    with np.load(tmp_path / 'streamed.npz') as streamed, \
            np.load(tmp_path / 'reference.npz') as reference:
        assert sorted(streamed.files) == sorted(reference.files)
        for key in reference.files:
            assert streamed[key].dtype == reference[key].dtype, key
            np.testing.assert_array_equal(streamed[key], reference[key], err_msg=key)
    back = load_embeddings(str(tmp_path / 'streamed.npz'))
    assert isinstance(back.embeddings, np.memmap)
    np.testing.assert_array_equal(back.embeddings[-1], mapped[-1])
    # 48 MB read through the map; np.savez would keep all of it resident.
    assert grown < 24, f'the writer grew by {grown:.0f} MB'


@pytest.mark.parametrize('ids', [['a', 'bcd', 'ééé'], [], [1, 22], ['x' * 5] * 70000])
def test_ids_are_written_in_chunks_as_numpy_would_write_them(tmp_path, ids):
    """The ids member is np.array(ids, dtype=str) (dtype and values), though written 65,536
    at a time; map_embeddings maps the rows alone."""
    from irtbox.structures.embeddings_file import map_embeddings
    rows = np.arange(2 * len(ids), dtype=np.float32).reshape(len(ids), 2)
    save_embeddings(str(tmp_path / 'f.npz'), EmbeddingSet(rows, ids=ids))
    with np.load(tmp_path / 'f.npz') as stored:
        expected = np.array([str(i) for i in ids], dtype=str) if ids else np.array([], dtype=str)
        assert stored['ids'].dtype == expected.dtype
        np.testing.assert_array_equal(stored['ids'], expected)
    assert load_embeddings(str(tmp_path / 'f.npz')).ids == [str(i) for i in ids]
    np.testing.assert_array_equal(map_embeddings(str(tmp_path / 'f.npz')), rows)
