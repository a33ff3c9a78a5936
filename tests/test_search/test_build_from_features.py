"""tools/search.py build --from-features: an extraction's embeddings (its shards or the merged
features.npz) indexed without decoding an image, under a memory budget, then queried."""
import glob
import json
import os
import os.path as osp
import re

import numpy as np
import pytest

from irtbox.cli import search as search_tool
from irtbox.search import ImageSearcher
from irtbox.search.budget import IndexBudgetError, parse_size, plan_index
from irtbox.search.build import build_index_from_features
from irtbox.structures.embeddings_file import EmbeddingSet, save_embeddings

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
# What an extraction records (the fields queries are checked against), for synthetic rows.
SYNTHETIC_IDENTITY = dict(config=CONFIG, checkpoint=None, weights_sha256='w',
                          preprocessing_sha256='p', embedding_dim=32, normalize=True)


@pytest.fixture(scope='module')
def extraction(tmp_path_factory, digits_root):
    """tools/extract.py's output for 24 digits: shards of 10 images, and features.npz."""
    import torch

    from irtbox.apis import init_model
    from irtbox.apis.extract import FEATURES_FILE, extract_sharded, list_images
    root = tmp_path_factory.mktemp('extraction')
    torch.manual_seed(0)
    checkpoint = str(root / 'model.pth')
    torch.save({'state_dict': init_model(CONFIG).state_dict()}, checkpoint)
    model = init_model(CONFIG, checkpoint)
    paths = list_images(str(digits_root / 'test'))[::15][:24]
    out = str(root / 'out')
    merged, _ = extract_sharded(model, paths, out, shard_size=10, progress=False)
    save_embeddings(osp.join(out, FEATURES_FILE), merged)
    return out, paths


@pytest.fixture(scope='module')
def vectors():
    """6,000 x 32 rows around 200 centres: enough for IVF with quantised codes."""
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((200, 32)).astype(np.float32)
    x = centres[rng.integers(0, 200, 6000)] + 0.3 * rng.standard_normal((6000, 32),
                                                                        dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(autouse=True)
def large_blocks_mapped(monkeypatch):
    """The calls of the allocator setting the build command makes for its process, recorded
    instead of made: a test worker's allocator is left as it is."""
    calls = []
    monkeypatch.setattr('irtbox.utils.memory.map_large_blocks', lambda: calls.append(1))
    return calls


def _features(path, x):
    save_embeddings(str(path), EmbeddingSet(x, ids=[f'v{i}' for i in range(len(x))],
                                            identity=SYNTHETIC_IDENTITY))
    return str(path)


@pytest.mark.slow
def test_shards_and_merged_file_give_the_same_index_then_query(extraction, tmp_path, capsys):
    out, paths = extraction
    from_shards, from_file = str(tmp_path / 'a'), str(tmp_path / 'b')
    search_tool.main(['build', '--from-features', out, from_shards, '--max-index-memory', '1G'])
    search_tool.main(['build', '--from-features', osp.join(out, 'features.npz'), from_file])
    printed = capsys.readouterr().out
    assert 'Flat: recall@10 vs exact search = 1.000' in printed
    a, b = ImageSearcher.load(from_shards), ImageSearcher.load(from_file)
    assert a.ids == b.ids == paths
    queries = np.asarray(a.embeddings[::5])
    assert [[h.id for h in hits] for hits in a.search(queries, k=5)] == \
        [[h.id for h in hits] for hits in b.search(queries, k=5)]
    with open(osp.join(from_shards, 'manifest.json')) as f:
        build = json.load(f)['build']
    assert build['rows'] == len(paths) and build['max_index_memory'] == 2**30
    # The second command: a query image through the model the extraction recorded.
    results = search_tool.main(['query', from_shards, paths[7], '--k', '3'])
    assert results[0]['hits'][0]['id'] == paths[7]


def test_a_missing_shard_is_named(vectors, tmp_path):
    out = tmp_path / 'out'
    os.makedirs(out / 'shards')
    (out / 'shards.json').write_text(json.dumps(dict(images=30, shard_size=10, shards=3)))
    for i in (0, 2):
        _features(out / 'shards' / f'shard_{i:06d}.npz', vectors[10 * i:10 * i + 10])
    with pytest.raises(SystemExit, match=r'1 of 3 shards .*shard_000001\.npz.*--resume'):
        search_tool.main(['build', '--from-features', str(out), str(tmp_path / 'index')])


@pytest.mark.slow
def test_the_budget_chooses_an_index_that_fits(vectors, tmp_path):
    budget = 400 * 1024  # under Flat's 750 KB: an IVF index with quantised codes
    done = build_index_from_features(_features(tmp_path / 'f.npz', vectors),
                                     str(tmp_path / 'index'), max_index_memory=budget,
                                     progress=False, log=lambda line: None)
    factory = done.report['factory']
    assert factory.startswith('IVF') and factory != 'Flat'
    index_file, = glob.glob(str(tmp_path / 'index' / 'index-*.faiss'))
    assert osp.getsize(index_file) <= budget
    # The recorded recall is what the saved index gives: recomputed here by brute force,
    # each query's own row left out of what it finds (a new query has none).
    loaded = ImageSearcher.load(str(tmp_path / 'index'))
    rows = np.sort(np.random.default_rng(0).choice(len(vectors), 1000, replace=False))

    def others(lists):
        return [[p for p in found if p != row][:10] for found, row in zip(lists, rows)]
    exact = others(np.argsort(-(vectors[rows] @ vectors.T), axis=1)[:, :11])
    found = others([[h.position for h in hits] for hits in loaded.search(vectors[rows], k=11)])
    recall = np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found, exact)])
    assert done.report['recall_at_10'] == pytest.approx(recall, abs=2e-3)
    assert loaded.build_info == done.report
    # Where the build's time went, step by step (within its whole time).
    stages = done.report['stage_seconds']
    assert list(stages) == ['read', 'exact', 'train', 'add', 'check']
    assert 0 <= sum(stages.values()) <= done.report['build_seconds'] + 0.2


def test_a_budget_too_small_names_the_smallest_that_fits(vectors, tmp_path, capsys):
    features = _features(tmp_path / 'f.npz', vectors)
    with pytest.raises(SystemExit) as error:
        search_tool.main(['build', '--from-features', features, str(tmp_path / 'index'),
                          '--max-index-memory', '64K'])
    message = str(error.value)
    assert '\n' not in message and '--max-index-memory 64K is too small' in message
    smallest = parse_size(re.search(r'needs (\S+)$', message).group(1))
    assert plan_index(len(vectors), 32, smallest).index_bytes <= smallest
    with pytest.raises(IndexBudgetError, match='max_build_memory 1M is too small'):
        plan_index(len(vectors), 32, smallest, max_build_memory=2**20)
    with pytest.raises(SystemExit):
        search_tool.parse_args(['build', '--from-features', features, 'x',
                                '--max-index-memory', '4Q'])
    assert "memory size '4Q': expected a positive number" in capsys.readouterr().err


@pytest.mark.slow
def test_a_memory_mapped_index_takes_new_rows_and_saves_them(vectors, tmp_path):
    """load() maps IVF lists read-only; adding or saving copies them into memory first (faiss
    would abort the process, or save a reference to the mapped file)."""
    searcher = ImageSearcher(factory='IVF16,Flat', identity=SYNTHETIC_IDENTITY)
    searcher.add(vectors[:5000])
    searcher.save(str(tmp_path / 'index'))
    loaded = ImageSearcher.load(str(tmp_path / 'index'))
    assert loaded.faiss_index._mapped
    loaded.add(vectors[5000:])
    loaded.save(str(tmp_path / 'index'))
    again = ImageSearcher.load(str(tmp_path / 'index'))
    searcher.add(vectors[5000:])
    queries = vectors[::97]
    assert [[h.id for h in r] for r in again.search(queries, k=5)] == \
        [[h.id for h in r] for r in searcher.search(queries, k=5)]


@pytest.mark.slow
def test_two_shard_indexes_merged_equal_one_index(vectors):
    """Beyond one machine (docs/search_and_export.md): one index per shard of the rows, each
    a copy of one trained index, searched together by faiss's IndexShards (which merges the
    per-shard top k), gives the one index's results."""
    import faiss
    trained = faiss.index_factory(32, 'IVF32,Flat', faiss.METRIC_INNER_PRODUCT)
    trained.train(vectors[:4000])
    whole, halves = faiss.clone_index(trained), faiss.IndexShards(32, True, True)
    whole.add(vectors)
    parts = [faiss.clone_index(trained) for _ in range(2)]
    parts[0].add(vectors[:2500])
    parts[1].add(vectors[2500:])
    for part in parts:
        part.nprobe = 8
        halves.add_shard(part)
    whole.nprobe = 8
    queries = vectors[::50]
    scores, ids = whole.search(queries, 10)
    merged_scores, merged_ids = halves.search(queries, 10)
    np.testing.assert_array_equal(merged_ids, ids)
    np.testing.assert_allclose(merged_scores, scores, rtol=1e-6)


def test_an_id_repeated_across_shards_is_refused_naming_the_later_file(vectors, tmp_path):
    """Two parts holding one image: the error names the file of the second occurrence and
    the id (duplicates are found through sorted hashes, not a set of every id)."""
    first = EmbeddingSet(vectors[:300], ids=[f'v{i}' for i in range(300)],
                         identity=SYNTHETIC_IDENTITY)
    second = EmbeddingSet(vectors[300:600], ids=[f'w{i}' for i in range(299)] + ['v7'],
                          identity=SYNTHETIC_IDENTITY)
    out = tmp_path / 'out'
    os.makedirs(out / 'shards')
    (out / 'shards.json').write_text(json.dumps(dict(images=600, shard_size=300, shards=2)))
    from irtbox.apis.extract import _shard_path
    save_embeddings(_shard_path(str(out), 0), first)
    save_embeddings(_shard_path(str(out), 1), second)
    with pytest.raises(ValueError, match=re.escape(_shard_path(str(out), 1)) + r': id v7 is '
                       'repeated'):
        build_index_from_features(str(out), str(tmp_path / 'index'), progress=False,
                                  log=lambda line: None)
    # Within one file too.
    repeated = EmbeddingSet(vectors[:5], ids=['a', 'b', 'c', 'b', 'a'],
                            identity=SYNTHETIC_IDENTITY)
    save_embeddings(str(tmp_path / 'one.npz'), repeated)
    with pytest.raises(ValueError, match=r'one\.npz: id b is repeated'):
        build_index_from_features(str(tmp_path / 'one.npz'), str(tmp_path / 'index2'),
                                  progress=False, log=lambda line: None)


def test_nprobe_stops_doubling_where_the_codes_limit_the_recall(vectors, tmp_path):
    """4-bit codes in their own order (k_factor 1) cap recall@10 of these rows well below the
    0.9 target: nprobe stops at the first doubling that gains nothing instead of scanning
    every list (what took hours at 10M rows), keeps the smaller nprobe and records the curve
    it measured. Re-ranked exactly (the default), the same codes reach the target."""
    lines = []
    done = build_index_from_features(_features(tmp_path / 'f.npz', vectors),
                                     str(tmp_path / 'index'), factory='IVF256,SQ4', k_factor=1,
                                     progress=False, log=lines.append)
    curve = done.report['recall_by_nprobe']
    assert [n for n, _ in curve] == [16, 32] and curve[1][1] - curve[0][1] < 0.005
    assert done.report['nprobe'] == 16 and done.recall_at_10 == curve[0][1] < 0.9
    assert any('saturates' in line for line in lines)
    assert ImageSearcher.load(str(tmp_path / 'index')).faiss_index.nprobe == 16
    reranked = build_index_from_features(_features(tmp_path / 'f.npz', vectors),
                                         str(tmp_path / 'index2'), factory='IVF256,SQ4',
                                         progress=False, log=lambda line: None)
    assert reranked.report['k_factor'] == 4
    assert reranked.report['recall_by_nprobe'][0][0] == 16
    assert reranked.recall_at_10 >= 0.9 > done.recall_at_10


def test_the_saved_k_factor_reranks_a_loaded_index_exactly(vectors, tmp_path):
    """A loaded index re-ranks with the k_factor its build saved: each query's hits are the
    exact best k of the index's k_factor x k candidates (scored here by brute force), with
    their exact inner products as scores."""
    done = build_index_from_features(_features(tmp_path / 'f.npz', vectors),
                                     str(tmp_path / 'index'), factory='IVF64,SQ4', k_factor=3,
                                     progress=False, log=lambda line: None)
    loaded = ImageSearcher.load(str(tmp_path / 'index'))
    assert loaded.k_factor == 3 == done.report['k_factor']
    queries = vectors[::301]
    _, candidates = loaded.faiss_index.search(queries, 15)
    for query, own, hits in zip(queries, candidates, loaded.search(queries, k=5)):
        scores = vectors[own] @ query
        best = own[np.argsort(-scores, kind='stable')[:5]]
        assert [h.position for h in hits] == list(best)
        np.testing.assert_allclose([h.score for h in hits], vectors[best] @ query, rtol=1e-5)
    plain = ImageSearcher.load(str(tmp_path / 'index'), k_factor=1)
    _, own_order = plain.search_positions(queries, 5)
    np.testing.assert_array_equal(own_order, loaded.faiss_index.search(queries, 5)[1])


def test_the_build_command_not_the_library_sets_the_allocator(vectors, tmp_path,
                                                            large_blocks_mapped):
    """The process-wide allocator setting is the command's (its process's job is the build);
    the library leaves a caller's process as it is. The setting itself runs on this libc."""
    import subprocess
    import sys
    features = _features(tmp_path / 'f.npz', vectors)
    build_index_from_features(features, str(tmp_path / 'lib'), progress=False,
                              log=lambda line: None)
    assert large_blocks_mapped == []
    search_tool.main(['build', '--from-features', features, str(tmp_path / 'cli')])
    assert large_blocks_mapped == [1]
    subprocess.run([sys.executable, '-c', 'from irtbox.utils.memory import map_large_blocks, '
                    'give_back_freed_heap; map_large_blocks(); give_back_freed_heap()'],
                   check=True, cwd=ROOT)


def test_lists_found_through_hnsw_from_4096_lists(vectors, tmp_path):
    """From 4,096 lists (about 1M rows) the budget's IVF finds its lists through an HNSW
    graph of the centroids, whose links it counts; such an index builds, loads mapped and
    answers as it did in the build."""
    big = plan_index(1_000_000, 384, parse_size('1G'))
    small = plan_index(200_000, 384, parse_size('128M'))
    assert big.factory == 'IVF4096_HNSW32,SQ8' and small.factory == 'IVF2048,SQ8'
    assert big.index_bytes == 1_000_000 * (384 + 8) + 4096 * (384 * 4 + 300) + 2 * 384 * 4
    done = build_index_from_features(_features(tmp_path / 'f.npz', vectors),
                                     str(tmp_path / 'index'), factory='IVF64_HNSW32,SQ8',
                                     progress=False, log=lambda line: None)
    loaded = ImageSearcher.load(str(tmp_path / 'index'))
    assert loaded.faiss_index._mapped == done.searcher.faiss_index._mapped == 'in place'
    # The filled index was checked mapped from a temporary file, gone with the rows' one.
    assert not [name for name in os.listdir(tmp_path / 'index') if name.endswith('.tmp')]
    queries = vectors[::211]
    assert [[h.id for h in r] for r in loaded.search(queries, k=5)] == \
        [[h.id for h in r] for r in done.searcher.search(queries, k=5)]
