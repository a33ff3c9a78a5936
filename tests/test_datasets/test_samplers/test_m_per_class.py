import math
import os.path as osp
from collections import Counter

import numpy as np
import pytest
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from irtbox.datasets.samplers import MPerClassSampler, OnePerClassSampler, get_dataset_labels


class LabelsDataset:
    """A dataset exposing labels through get_gt_labels()."""

    def __init__(self, labels):
        self.labels = np.asarray(labels)

    def __len__(self):
        return len(self.labels)

    def get_gt_labels(self):
        return self.labels


class InfoDataset:
    """A dataset exposing labels only through get_data_info(i)['gt_label']."""

    def __init__(self, labels):
        self.labels = list(labels)

    def __len__(self):
        return len(self.labels)

    def get_data_info(self, i):
        return dict(gt_label=self.labels[i], img_path=f'{i}.jpg')


def chunks(indices, size):
    assert len(indices) % size == 0
    return [indices[i:i + size] for i in range(0, len(indices), size)]


def check_pm_batches(indices, labels, batch_size, m):
    for batch in chunks(indices, batch_size):
        counts = Counter(labels[batch].tolist())
        assert len(counts) == batch_size // m and set(counts.values()) == {m}
        for c in counts:  # distinct images unless the class is too small
            members = [i for i in batch if labels[i] == c]
            n_c = int((labels == c).sum())
            assert len(set(members)) == min(m, n_c)


@pytest.mark.parametrize('batch_size, m', [(8, 2), (12, 4), (6, 3), (5, 1)])
def test_complete_pm_batches(batch_size, m):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 9, size=70)  # uneven class sizes
    labels[:9] = np.arange(9)  # every class present
    sampler = MPerClassSampler(LabelsDataset(labels), batch_size, m=m, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        indices = list(sampler)
        assert len(indices) == len(sampler) == max(1, 70 // batch_size) * batch_size
        check_pm_batches(indices, labels, batch_size, m)


def test_small_classes_sampled_with_replacement():
    labels = np.array([0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3])  # class 0 has 1 image < m
    sampler = MPerClassSampler(LabelsDataset(labels), batch_size=6, m=3, seed=0)
    seen_class0 = False
    for epoch in range(5):
        sampler.set_epoch(epoch)
        for batch in chunks(list(sampler), 6):
            check_pm_batches(batch, labels, 6, 3)
            if 0 in batch:
                seen_class0 = True
                assert batch.count(0) == 3  # its only image, three times
    assert seen_class0


def test_one_pass_covers_every_image_once_across_ranks():
    # 8 classes x 4 images, P = 4, M = 2: an epoch (4 batches) is exactly two passes over the
    # classes and one pass over each class's images, so each index appears exactly once.
    labels = np.repeat(np.arange(8), 4)
    per_rank = [list(MPerClassSampler(LabelsDataset(labels), 8, m=2, seed=5, rank=r,
                                      world_size=2)) for r in range(2)]
    assert len(per_rank[0]) == len(per_rank[1]) == 16
    assert not set(per_rank[0]) & set(per_rank[1])
    assert sorted(per_rank[0] + per_rank[1]) == list(range(32))
    for indices in per_rank:
        check_pm_batches(indices, labels, 8, 2)


@pytest.mark.parametrize('world_size', [2, 3])
def test_ranks_share_one_global_list(world_size):
    labels = np.random.default_rng(1).integers(0, 6, size=50)
    dataset = LabelsDataset(labels)
    single = chunks(list(MPerClassSampler(dataset, 8, m=2, seed=7)), 8)
    ranks = [chunks(list(MPerClassSampler(dataset, 8, m=2, seed=7, rank=r,
                                          world_size=world_size)), 8)
             for r in range(world_size)]
    per_rank = math.ceil((50 // 8) / world_size)
    assert all(len(batches) == per_rank for batches in ranks)
    # interleaving the ranks' batches (rank r has batches r, r + W, ...) restores the global
    # order, whose first batches are the single-process epoch
    interleaved = [ranks[b % world_size][b // world_size] for b in range(per_rank * world_size)]
    assert interleaved[:len(single)] == single
    for batches in ranks:
        check_pm_batches(sum(batches, []), labels, 8, 2)


def test_seed_and_epoch():
    dataset = LabelsDataset(np.repeat(np.arange(10), 5))

    def order(seed, epoch, shuffle=True):
        sampler = MPerClassSampler(dataset, 10, m=5, seed=seed, shuffle=shuffle)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert order(0, 0) == order(0, 0)
    assert order(0, 0) != order(1, 0)
    assert order(0, 0) != order(0, 1)
    assert order(0, 1) == order(0, 1)
    # without shuffling: classes and images in dataset order, whatever the seed or epoch
    assert order(0, 0, False) == order(1, 3, False) == list(range(50))


def test_one_per_class_sampler():
    labels = np.random.default_rng(2).integers(0, 7, size=40)
    labels[:7] = np.arange(7)
    sampler = OnePerClassSampler(InfoDataset(labels.tolist()), batch_size=5, seed=0)
    indices = list(sampler)
    assert len(indices) == len(sampler) == (40 // 5) * 5
    for batch in chunks(indices, 5):
        assert len(set(labels[batch].tolist())) == 5


def test_get_dataset_labels():
    labels = [3, 1, 3, 0]
    np.testing.assert_array_equal(get_dataset_labels(InfoDataset(labels)), labels)
    np.testing.assert_array_equal(get_dataset_labels(LabelsDataset(labels)), labels)
    with pytest.raises(TypeError, match='neither get_gt_labels'):
        get_dataset_labels([1, 2])


def test_errors():
    dataset = LabelsDataset(np.repeat(np.arange(3), 4))
    with pytest.raises(ValueError,
                       match=r'batch_size \(10\) must be a multiple of m \(4\)'):
        MPerClassSampler(dataset, 10, m=4)
    with pytest.raises(ValueError, match=r'needs 4 distinct classes .* has only 3'):
        MPerClassSampler(dataset, 8, m=2)
    with pytest.raises(ValueError, match=r'rank 2 is not in \[0, 2\)'):
        MPerClassSampler(dataset, 6, m=2, rank=2, world_size=2)
    with pytest.raises(ValueError, match=r'^MPerClassSampler: m must be a positive integer, '
                                         r'got 0$'):
        MPerClassSampler(dataset, 6, m=0)
    with pytest.raises(ValueError, match=r'^MPerClassSampler: batch_size must be a positive '
                                         r'integer, got 6.0$'):
        MPerClassSampler(dataset, 6.0, m=2)


@pytest.mark.slow
def test_runner_builds_dataloader_on_fixture(data_dir):
    pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(24, 24)),
                dict(type='RandomCrop', crop_size=20), dict(type='PackRetrievalInputs')]
    cfg = dict(batch_size=8, num_workers=0,
               sampler=dict(type='MPerClassSampler', batch_size=8, m=2),
               dataset=dict(type='SOPDataset', data_root=osp.join(data_dir, 'sop'),
                            split='train', pipeline=pipeline))
    with DefaultScope.overwrite_default_scope('irtbox'):  # a config's default_scope
        loader = Runner.build_dataloader(cfg, seed=0)  # passes dataset and seed to the sampler
    assert isinstance(loader.sampler, MPerClassSampler)
    batches = list(loader)
    assert len(batches) == len(loader.dataset) // 8
    for batch in batches:
        labels = Counter(s.gt_label.item() for s in batch['data_samples'])
        assert len(labels) == 4 and set(labels.values()) == {2}
        assert all(x.shape == (3, 20, 20) for x in batch['inputs'])


def test_infinite_sampler_runs_through_consecutive_epochs():
    dataset = LabelsDataset([0, 0, 1, 1, 2, 2, 3, 3])
    finite = MPerClassSampler(dataset, batch_size=4, m=2, seed=3)
    infinite = MPerClassSampler(dataset, batch_size=4, m=2, seed=3, infinite=True)
    infinite.set_epoch(5)
    stream = iter(infinite)
    expected = []
    for epoch in (5, 6, 7):
        finite.set_epoch(epoch)
        expected += list(finite)
    assert [next(stream) for _ in range(len(expected))] == expected
