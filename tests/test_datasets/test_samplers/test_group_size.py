import os.path as osp

import numpy as np
import pytest
from mmengine.registry import DefaultScope
from mmengine.runner import Runner
from PIL import Image

from irtbox.datasets import GLDv2CleanDataset
from irtbox.datasets.samplers import GroupSizeSampler
from irtbox.datasets.samplers import group_size as gs


class SizeDataset:
    """A dataset whose data infos carry width / height (no files)."""

    def __init__(self, sizes):  # [(width, height), ...]
        self.sizes = list(sizes)

    def __len__(self):
        return len(self.sizes)

    def get_data_info(self, i):
        w, h = self.sizes[i]
        return dict(img_path=f'/nonexistent/{i}.jpg', width=w, height=h, gt_label=0)


def expected_group(w, h):
    # bins of h / w at 0.67, 0.77, 1.33, 1.5, lower edge inclusive
    r = h / w
    return 0 if r < 0.67 else 1 if r < 0.77 else 2 if r < 1.33 else 3 if r < 1.5 else 4


def random_sizes(n, seed=0):
    rng = np.random.default_rng(seed)
    widths, heights = rng.integers(200, 1000, n), rng.integers(200, 1000, n)
    return [(int(w), int(h)) for w, h in zip(widths, heights)]


def batches_of(sampler):
    idx = list(sampler)
    assert len(idx) == len(sampler) and len(idx) % sampler.batch_size == 0
    return [idx[i:i + sampler.batch_size] for i in range(0, len(idx), sampler.batch_size)]


def test_aspect_group_bins():
    # edges belong to the upper group (np.digitize, right=False)
    h = np.array([50, 67, 76, 77, 100, 133, 149, 150, 300])
    assert gs.aspect_group(h, 100).tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 4]
    # the default sizes go from wide to tall like the groups
    assert [expected_group(w, h) for w, h in gs.DEFAULT_GROUP_SIZES] == [1, 1, 2, 3, 3]
    ratios = [h / w for w, h in gs.DEFAULT_GROUP_SIZES]
    assert ratios == sorted(ratios)


def test_one_group_per_complete_batch():
    sizes = random_sizes(300)
    sampler = GroupSizeSampler(SizeDataset(sizes), batch_size=8, seed=0)
    groups = np.array([expected_group(w, h) for w, h in sizes])
    assert sampler.groups.tolist() == groups.tolist()
    counts = np.bincount(groups, minlength=5)
    assert sampler.group_counts.tolist() == counts.tolist()
    assert len(sampler) == (counts // 8).sum() * 8
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = batches_of(sampler)
        for b in batches:
            assert len(set(groups[b].tolist())) == 1
        flat = [i for b in batches for i in b]
        assert len(set(flat)) == len(flat)  # no repeats within an epoch
        # per group, exactly the complete batches are used; the remainder is dropped
        used = np.bincount(groups[flat], minlength=5)
        assert used.tolist() == (counts // 8 * 8).tolist()


def test_batches_reformed_every_epoch_and_deterministic():
    sizes = random_sizes(200, seed=1)
    a = GroupSizeSampler(SizeDataset(sizes), batch_size=4, seed=5)
    b = GroupSizeSampler(SizeDataset(sizes), batch_size=4, seed=5)
    epochs = []
    for epoch in range(2):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert list(a) == list(b)
        epochs.append({frozenset(x) for x in batches_of(a)})
    assert epochs[0] != epochs[1]  # new batches, not only a new order
    c = GroupSizeSampler(SizeDataset(sizes), batch_size=4, seed=6)
    c.set_epoch(1)
    assert list(c) != list(a)  # another seed, other batches


@pytest.mark.parametrize('world_size', [2, 3])
def test_grouped_then_sharded_across_ranks(world_size):
    sizes = random_sizes(250, seed=2)
    groups = np.array([expected_group(w, h) for w, h in sizes])
    single = GroupSizeSampler(SizeDataset(sizes), batch_size=6, seed=3)
    total = len(single) // 6
    for epoch in (0, 1):
        ranks = []
        for rank in range(world_size):
            s = GroupSizeSampler(SizeDataset(sizes), batch_size=6, seed=3, rank=rank,
                                 world_size=world_size)
            s.set_epoch(epoch)
            ranks.append(batches_of(s))
        assert len({len(r) for r in ranks}) == 1  # equal count per rank
        assert len(ranks[0]) == total // world_size
        flat = [i for r in ranks for b in r for i in b]
        assert len(set(flat)) == len(flat)  # rank-disjoint
        for r in ranks:
            for b in r:
                assert len(set(groups[b].tolist())) == 1
        # the ranks deal out the single-process batches of the epoch
        single.set_epoch(epoch)
        first = batches_of(single)[:len(ranks[0]) * world_size]
        assert sorted(map(tuple, first)) == sorted(tuple(b) for r in ranks for b in r)


def test_no_shuffle_keeps_dataset_order():
    sizes = [(100, 50)] * 5 + [(100, 100)] * 4 + [(100, 50)] * 2
    sampler = GroupSizeSampler(SizeDataset(sizes), batch_size=2, shuffle=False)
    assert list(sampler) == [0, 1, 2, 3, 4, 9, 5, 6, 7, 8]


def test_infinite_continues_with_next_epochs():
    sizes = random_sizes(60, seed=4)
    sampler = GroupSizeSampler(SizeDataset(sizes), batch_size=4, seed=0, infinite=True)
    it = iter(sampler)
    stream = [next(it) for _ in range(3 * len(sampler))]
    finite = GroupSizeSampler(SizeDataset(sizes), batch_size=4, seed=0)
    expected = []
    for epoch in range(3):
        finite.set_epoch(epoch)
        expected += list(finite)
    assert stream == expected


@pytest.mark.slow
def test_sizes_from_image_headers(data_dir, monkeypatch):
    monkeypatch.setattr(gs, '_HEADER_CHUNK', 4)  # several chunks of header reads
    root = osp.join(data_dir, 'gld', 'gldv2')
    dataset = GLDv2CleanDataset(data_root=root)
    truth = []
    for i in range(len(dataset)):
        with Image.open(dataset.get_data_info(i)['img_path']) as img:
            truth.append(expected_group(*img.size))
    sampler = GroupSizeSampler(dataset, batch_size=2, seed=0, num_threads=2)
    assert sampler.groups.tolist() == truth
    assert sampler.group_counts.tolist() == [3, 3, 3, 2, 3]
    assert len(sampler) == 2 * (1 + 1 + 1 + 1 + 1)


def test_header_size_follows_exif_rotation(tmp_path):
    import mmcv
    path = str(tmp_path / 'rotated.jpg')
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees when displaying / decoding
    Image.fromarray(np.zeros((30, 50, 3), np.uint8)).save(path, exif=exif.tobytes())
    decoded = mmcv.imread(path)  # as LoadImageFromFile(color_type='color') decodes it
    assert gs.read_image_size(path) == decoded.shape[:2] == (50, 30)
    with pytest.raises(OSError, match='missing.jpg'):
        gs.read_image_size(str(tmp_path / 'missing.jpg'))


@pytest.mark.slow
def test_header_reading_is_shared_across_ranks(data_dir, monkeypatch):
    dataset = GLDv2CleanDataset(data_root=osp.join(data_dir, 'gld', 'gldv2'))
    truth = gs.get_image_sizes(dataset)
    reads = []

    def counting_read(path):
        reads.append(path)
        return gs.Image.open(path).size[::-1]

    def gather(obj):  # what rank 1 would contribute: the odd positions
        return [obj, [(k, tuple(truth[k])) for k in range(1, len(dataset), 2)]]

    monkeypatch.setattr(gs, 'read_image_size', counting_read)
    monkeypatch.setattr(gs, 'get_dist_info', lambda: (0, 2))
    monkeypatch.setattr(gs, 'all_gather_object', gather)
    sizes = gs.get_image_sizes(dataset)
    assert len(reads) == (len(dataset) + 1) // 2  # rank 0 read its half only
    assert sizes.tolist() == truth.tolist()


@pytest.mark.slow
def test_built_by_runner_dataloader(data_dir):
    root = osp.join(data_dir, 'gld', 'gldv2')
    with DefaultScope.overwrite_default_scope('irtbox'):
        loader = Runner.build_dataloader(
            dict(batch_size=2, num_workers=0,
                 dataset=dict(type='GLDv2CleanDataset', data_root=root),
                 sampler=dict(type='GroupSizeSampler', batch_size=2)), seed=1)
    assert isinstance(loader.sampler, GroupSizeSampler) and loader.sampler.seed == 1
    assert len(loader) == 5


def test_bad_arguments():
    data = SizeDataset(random_sizes(20))
    with pytest.raises(ValueError, match=r'^GroupSizeSampler: batch_size must be a positive '
                                         r'integer, got 0$'):
        GroupSizeSampler(data, batch_size=0)
    with pytest.raises(ValueError, match='strictly increasing'):
        GroupSizeSampler(data, batch_size=2, aspect_bins=(1.5, 0.67))
    with pytest.raises(ValueError, match=r'rank 2 is not in \[0, 2\)'):
        GroupSizeSampler(data, batch_size=2, rank=2, world_size=2)
    with pytest.raises(ValueError, match=r'0 complete batches of 8 images.*\[1, 0, 4, 0, 0\]'):
        GroupSizeSampler(SizeDataset([(100, 50)] + [(100, 100)] * 4), batch_size=8)
    with pytest.raises(ValueError, match='fewer than one per rank'):
        GroupSizeSampler(SizeDataset([(100, 100)] * 4), batch_size=4, rank=0, world_size=2)
    with pytest.raises(ValueError, match=r"sample 1 \('/nonexistent/1.jpg'\).*\(0, 100\)"):
        GroupSizeSampler(SizeDataset([(100, 100), (100, 0)]), batch_size=1)
    with pytest.raises(ValueError, match=r'\(height, width\)\?'):
        gs.check_group_sizes(((352, 512), (384, 512), (448, 448), (512, 384), (512, 352)), 5)
    with pytest.raises(ValueError, match='one positive'):
        gs.check_group_sizes(((448, 448), ) * 4, 5)
