"""irtbox.apis.tester without a model: the sets a tested runner leaves, the --out files, and the
output checks made before a test starts."""
import json
import os
import os.path as osp
from types import SimpleNamespace

import numpy as np
import pytest

from irtbox.apis import tester
from irtbox.apis.tester import (EvaluationSetupError, check_output_path, dataset_image_ids,
                                result_sets, write_results)
from irtbox.structures import EmbeddingSet, embedding_set_names, load_embeddings


class FakeDataset:
    """An MMEngine-like dataset: images under data_root (one outside it), classes."""

    def __init__(self, root, n, classes=('a', 'b')):
        self.data_root = str(root)
        self.paths = [osp.join(self.data_root, 'img', f'{i}.jpg') for i in range(n - 1)]
        self.paths.append('/elsewhere/outside.jpg')
        self.metainfo = dict(classes=list(classes))

    def get_data_info(self, i):
        return dict(img_path=self.paths[i])


def metric(n, seed, tag=None, **extra):
    rng = np.random.default_rng(seed)
    outputs = dict(embeddings=rng.normal(size=(n, 4)).astype(np.float32),
                   labels=np.arange(n) % 2, sample_idx=np.arange(n)[::-1].copy(),
                   is_query=np.arange(n) == 0, **extra)
    return SimpleNamespace(last_outputs=outputs, tag=tag)


def fake_runner(loaders):
    """loaders: [(dataset, [metric, ...]), ...]: a multi-dataset loop when there are several."""
    evaluators = [SimpleNamespace(metrics=metrics) for _, metrics in loaders]
    if len(loaders) == 1:
        loop = SimpleNamespace(dataloader=SimpleNamespace(dataset=loaders[0][0]))
        return SimpleNamespace(test_loop=loop, test_evaluator=evaluators[0])
    loop = SimpleNamespace(dataloaders=[SimpleNamespace(dataset=d) for d, _ in loaders],
                           evaluators=evaluators)
    return SimpleNamespace(test_loop=loop)


def test_dataset_image_ids_relative_to_the_root(tmp_path):
    dataset = FakeDataset(tmp_path, 3)
    ids, root = dataset_image_ids(dataset, [2, 0])
    assert root == str(tmp_path)
    assert ids == ['/elsewhere/outside.jpg', osp.join('img', '0.jpg')]
    dataset.data_root = ''
    assert dataset_image_ids(dataset, [1]) == ([osp.join(str(tmp_path), 'img', '1.jpg')], '')


def test_one_test_set_and_a_second_metric(tmp_path):
    dataset = FakeDataset(tmp_path, 5)
    first, second = metric(5, 0, ap_all=np.ones(1)), metric(5, 1, tag='no_whitening')
    empty = SimpleNamespace(last_outputs=None)  # a metric that keeps nothing
    sets = result_sets(fake_runner([(dataset, [first, empty, second])]), {'recall@1': 50},
                       identity=False)
    assert list(sets) == ['', 'no_whitening']
    main = sets['']
    np.testing.assert_array_equal(main.embeddings, first.last_outputs['embeddings'])
    assert main.ids[0] == '/elsewhere/outside.jpg'  # sample_idx 4 first: reversed order
    assert main.ids[1:] == [osp.join('img', f'{i}.jpg') for i in (3, 2, 1, 0)]
    assert main.data_root == str(tmp_path) and main.class_names == ['a', 'b']
    assert sorted(main.extra) == ['ap_all', 'sample_idx']
    assert main.metrics == {'recall@1': 50.0} and main.identity is None
    np.testing.assert_array_equal(sets['no_whitening'].embeddings,
                                  second.last_outputs['embeddings'])


def test_several_test_sets_are_numbered(tmp_path):
    loaders = [(FakeDataset(tmp_path, 4), [metric(4, 0), metric(4, 1)]),
               (FakeDataset(tmp_path, 3), [metric(3, 2)])]
    sets = result_sets(fake_runner(loaders), identity=False)
    assert list(sets) == ['0', '0/metric1', '1']  # no tag: the metric's position
    assert [len(s) for s in sets.values()] == [4, 4, 3]


def test_write_results_npz_and_json(tmp_path):
    metrics = {'recall@1': np.float32(0.75), 'map@r': 0.5}
    sets = {'0': EmbeddingSet(np.eye(3, dtype=np.float32), ids=['a', 'b', 'c'], data_root='/d',
                              labels=np.arange(3), extra=dict(sample_idx=np.arange(3))),
            '1': EmbeddingSet(np.ones((2, 3), np.float32))}
    write_results(str(tmp_path / 'only.json'), sets, metrics)
    write_results(str(tmp_path / 'full.npz'), sets, metrics)
    assert sorted(os.listdir(tmp_path)) == ['full.json', 'full.npz', 'only.json']
    with open(tmp_path / 'only.json') as f, open(tmp_path / 'full.json') as g:
        assert json.load(f) == json.load(g) == {'recall@1': 0.75, 'map@r': 0.5}
    path = str(tmp_path / 'full.npz')
    assert embedding_set_names(path) == ['0', '1']
    back = load_embeddings(path, '0')
    np.testing.assert_array_equal(back.embeddings, np.eye(3))
    assert back.paths() == ['/d/a', '/d/b', '/d/c']
    assert back.metrics == {'recall@1': 0.75, 'map@r': 0.5}
    assert sets['0'].metrics == {}  # the caller's sets are not changed
    with pytest.raises(ValueError, match=r'results.csv must end with \.npz or \.json'):
        write_results(str(tmp_path / 'results.csv'), sets, metrics)


def test_check_output_path(tmp_path):
    check_output_path(str(tmp_path / 'new' / 'deeper' / 'r.npz'), 'out')  # created later
    assert not (tmp_path / 'new').exists() and os.listdir(tmp_path) == []  # nothing left
    (tmp_path / 'file.txt').write_text('x')
    with pytest.raises(EvaluationSetupError, match=r'^out .*file.txt/r.npz: .*file.txt is a '
                                                   'file, not a folder'):
        check_output_path(str(tmp_path / 'file.txt' / 'r.npz'), 'out')
    with pytest.raises(EvaluationSetupError, match=r'^show_dir .*file.txt: exists and is not '
                                                   'a folder'):
        check_output_path(str(tmp_path / 'file.txt'), 'show_dir', folder=True)
    with pytest.raises(EvaluationSetupError, match='exists and is not a file'):
        check_output_path(str(tmp_path), 'out')


@pytest.mark.skipif(not hasattr(os, 'geteuid') or os.geteuid() == 0,
                    reason='root writes into read-only folders')
def test_check_output_path_read_only_folder(tmp_path):
    folder = tmp_path / 'ro'
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(EvaluationSetupError, match=r'^out .*ro/r.npz: cannot write in'):
            check_output_path(str(folder / 'r.npz'), 'out')
    finally:
        folder.chmod(0o755)


def test_unwritable_out_fails_before_the_test(tmp_path, monkeypatch):
    """The check runs before the config is even loaded: no evaluation is wasted."""
    def fail(*args, **kwargs):
        raise AssertionError('the test started although --out cannot be written')
    monkeypatch.setattr('irtbox.apis.tester.load_run_config', fail)
    monkeypatch.setattr('irtbox.apis.tester.build_runner', fail)
    (tmp_path / 'file.txt').write_text('x')
    with pytest.raises(EvaluationSetupError, match='file.txt/r.npz'):
        tester.run_test('any_config.py', out=str(tmp_path / 'file.txt' / 'r.npz'))
    with pytest.raises(EvaluationSetupError, match='^show_dir .*file.txt'):
        tester.run_test('any_config.py', show_dir=str(tmp_path / 'file.txt'))
