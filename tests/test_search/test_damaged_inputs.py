"""Damaged or foreign inputs of a build or a load, each refused in one line naming the file or
the key and what was expected (issue 48, item 6)."""
import json
import os
import os.path as osp
import re

import numpy as np
import pytest

from irtbox.cli import search as search_tool
from irtbox.search import ImageSearcher
from irtbox.structures.embeddings_file import EmbeddingSet, save_embeddings
from irtbox.utils.download import sha256sum

IDENTITY = dict(config=None, checkpoint=None, weights_sha256='w', preprocessing_sha256='p',
                embedding_dim=8, normalize=True)


def _rows(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)


def _extraction(out, shards=3, listed=3):
    os.makedirs(out / 'shards')
    (out / 'shards.json').write_text(json.dumps(dict(images=10 * shards, shard_size=10,
                                                     shards=listed)))
    for i in range(shards):
        save_embeddings(str(out / 'shards' / f'shard_{i:06d}.npz'), EmbeddingSet(
            _rows(10, i), ids=[f'{i}/{j}' for j in range(10)], identity=IDENTITY))
    return out


def _flip(path, at=-300):
    data = bytearray(open(path, 'rb').read())
    data[at] ^= 0x10
    open(path, 'wb').write(bytes(data))


def _empty(out):
    open(out / 'shards' / 'shard_000001.npz', 'w').close()


def _manifest(text):
    return lambda out: (out / 'shards.json').write_text(text)


@pytest.mark.parametrize('damage, message', [
    (_empty, r'shard_000001\.npz: not a readable \.npz \(an empty file \(0 bytes\)\)'),
    (lambda out: _flip(out / 'shards' / 'shard_000002.npz'),
     r"shard_000002\.npz: its array '\w+' is damaged \(Bad CRC-32"),
    (_manifest('{"shards": 3,'), r'shards\.json: not valid JSON \('),
    (_manifest('{"shards": -1}'), r'shards\.json: "shards" is -1; expected a whole number >= 0'),
    (_manifest('{"shards": "2"}'), r'shards\.json: "shards" is \'2\'; expected a whole number'),
    (_manifest('[3]'), r'shards\.json: "shards" is None; expected a whole number'),
    (_manifest('{"shards": 2, "images": 20}'),
     r'shards\.json lists 2 shards, but .*shards also holds shard_000002\.npz; expected the '
     'shards of one extraction')])
def test_damaged_shards_are_named(tmp_path, damage, message):
    out = _extraction(tmp_path / 'out')
    damage(out)
    with pytest.raises(SystemExit) as error:
        search_tool.main(['build', '--from-features', str(out), str(tmp_path / 'index')])
    assert '\n' not in str(error.value) and re.search(message, str(error.value)), error.value


def _index(tmp_path):
    searcher = ImageSearcher()
    searcher.add(_rows(40), ids=[f'p/{i}.jpg' for i in range(40)])
    folder = str(tmp_path / 'idx')
    searcher.save(folder)
    with open(osp.join(folder, 'manifest.json')) as f:
        return folder, json.load(f)


def test_a_manifest_that_is_a_list_is_named(tmp_path):
    folder, manifest = _index(tmp_path)
    with open(osp.join(folder, 'manifest.json'), 'w') as f:
        json.dump([manifest], f)
    with pytest.raises(ValueError, match=r'manifest\.json: a JSON list; expected an object'):
        ImageSearcher.load(folder)


def test_rows_bit_flipped_with_their_sha256_rewritten_are_named(tmp_path):
    folder, manifest = _index(tmp_path)
    rows = osp.join(folder, manifest['files']['embeddings'])
    _flip(rows, at=osp.getsize(rows) // 3)
    manifest['sha256'][manifest['files']['embeddings']] = sha256sum(rows)
    with open(osp.join(folder, 'manifest.json'), 'w') as f:
        json.dump(manifest, f)
    with pytest.raises(ValueError, match=rf"{re.escape(rows)}: its array '\w+' is damaged"):
        ImageSearcher.load(folder)


def test_a_build_memory_budget_alone_names_no_index_budget(tmp_path):
    out = _extraction(tmp_path / 'out')
    with pytest.raises(SystemExit) as error:
        search_tool.main(['build', '--from-features', str(out), str(tmp_path / 'index'),
                          '--max-build-memory', '100'])
    assert re.search(r'--max-build-memory 100 ?B? is too small for 30 x 8 vectors: the '
                     r'smallest build of any index, Flat, needs \S+$', str(error.value)), \
        error.value
