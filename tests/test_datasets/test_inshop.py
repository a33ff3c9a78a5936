import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import InShopDataset


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def write_file(path, text):
    path.write_text(text)
    return str(path)

HEADER = 'image_name item_id evaluation_status'


def rows(root):
    return [line.split() for line in
            read_lines(osp.join(root, 'Eval', 'list_eval_partition.txt'))[2:]]


@pytest.mark.slow
def test_inshop_train(data_dir):
    root = osp.join(data_dir, 'inshop')
    ds = InShopDataset(data_root=root, split='train')
    train = [r for r in rows(root) if r[2] == 'train']
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == [
        osp.join(root, 'Img', r[0]) for r in train]
    _, labels = np.unique([r[1] for r in train], return_inverse=True)
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.get_query_mask() is None
    assert ds.num_classes >= 4


@pytest.mark.slow
def test_inshop_query_gallery(data_dir):
    root = osp.join(data_dir, 'inshop')
    ds = InShopDataset(data_root=root, split='test')
    test = [r for r in rows(root) if r[2] != 'train']
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [d['img_path'] for d in infos] == [osp.join(root, 'Img', r[0]) for r in test]
    assert all(osp.isfile(d['img_path']) for d in infos)
    is_query = ds.get_query_mask()
    np.testing.assert_array_equal(is_query, [r[2] == 'query' for r in test])
    assert [d['is_query'] for d in infos] == is_query.tolist()
    labels = ds.get_gt_labels()
    # one label space for query and gallery: same item id <=> same label
    items = [r[1] for r in test]
    for i in range(len(test)):
        for j in range(len(test)):
            assert (labels[i] == labels[j]) == (items[i] == items[j])
    assert sorted(set(labels.tolist())) == list(range(ds.num_classes))
    # every query item has gallery images; train and test items are disjoint
    assert set(labels[is_query]) <= set(labels[~is_query])
    train = InShopDataset(data_root=root, split='train')
    assert not set(train.metainfo['classes']) & set(ds.metainfo['classes'])


@pytest.mark.slow
def test_inshop_image_prefix(tmp_path):
    write_file(tmp_path / 'list.txt', f'2\n{HEADER}\nimg/A/id_1/1.jpg id_1 query\n'
               'img/A/id_1/2.jpg id_1 gallery\n')
    ds = InShopDataset(data_root=str(tmp_path), ann_file='list.txt', split='test',
                       data_prefix=dict(img_path=''))
    assert ds.get_data_info(0)['img_path'] == osp.join(str(tmp_path), 'img/A/id_1/1.jpg')


@pytest.mark.parametrize('text, message', [
    (f'2\n{HEADER}\nimg/a.jpg id_1 train\n', r'line 1: says 2 entries, but the file lists 1'),
    (f'x\n{HEADER}\nimg/a.jpg id_1 train\n', r'line 1: expected an integer number of entries'),
    ('1\nimage_name item_id\nimg/a.jpg id_1 train\n', r'line 2: expected the header'),
    (f'2\n{HEADER}\nimg/a.jpg id_1 train\nimg/b.jpg id_1 val\n', r"line 4: expected 'image_name "
     r"item_id train\|query\|gallery'"),
])
def test_inshop_malformed(tmp_path, text, message):
    write_file(tmp_path / 'list.txt', text)
    with pytest.raises(ValueError, match=r'list\.txt, ' + message):
        InShopDataset(data_root=str(tmp_path), ann_file='list.txt')


def test_inshop_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError,
                       match=r'InShopDataset: ann_file .*Eval/list_eval_partition\.txt'):
        InShopDataset(data_root=str(tmp_path))


def test_inshop_empty_split(tmp_path):
    write_file(tmp_path / 'list.txt', f'1\n{HEADER}\nimg/a.jpg id_1 train\n')
    with pytest.raises(ValueError, match=r"InShopDataset: split 'test' is empty"):
        InShopDataset(data_root=str(tmp_path), ann_file='list.txt', split='test')
