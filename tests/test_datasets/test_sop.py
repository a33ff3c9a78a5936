import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import SOPDataset


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def write_file(path, text):
    path.write_text(text)
    return str(path)


def expected(data_root, split):
    """(paths, labels) straight from the annotation file, labels remapped with np.unique."""
    rows = [line.split() for line in read_lines(osp.join(data_root, f'Ebay_{split}.txt'))[1:]]
    class_ids = np.array([int(r[1]) for r in rows])
    _, labels = np.unique(class_ids, return_inverse=True)
    return [osp.join(data_root, r[3]) for r in rows], labels


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_sop_parses_fixture(data_dir, split):
    root = osp.join(data_dir, 'sop')
    ds = SOPDataset(data_root=root, split=split)
    paths, labels = expected(root, split)
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [d['img_path'] for d in infos] == paths
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.num_classes == labels.max() + 1 >= 4
    assert all(osp.isfile(p) for p in paths)
    assert all(p.endswith('.JPG') for p in paths)
    assert ds.get_query_mask() is None  # leave-one-out
    assert all('is_query' not in d for d in infos)


@pytest.mark.slow
def test_sop_splits_disjoint(data_dir):
    root = osp.join(data_dir, 'sop')
    train = SOPDataset(data_root=root, split='train')
    test = SOPDataset(data_root=root, split='test')
    assert not set(train.metainfo['classes']) & set(test.metainfo['classes'])
    train_paths = {train.get_data_info(i)['img_path'] for i in range(len(train))}
    test_paths = {test.get_data_info(i)['img_path'] for i in range(len(test))}
    assert not train_paths & test_paths


@pytest.mark.slow
def test_sop_labels_follow_class_id_order(tmp_path):
    write_file(tmp_path / 'Ebay_test.txt', 'image_id class_id super_class_id path\n'
               '1 11320 1 a/1.JPG\n2 11318 1 a/2.JPG\n3 11320 1 a/3.JPG\n4 11319 2 b/4.JPG\n')
    ds = SOPDataset(data_root=str(tmp_path), split='test')
    # classes sorted: 11318 -> 0, 11319 -> 1, 11320 -> 2
    assert ds.get_gt_labels().tolist() == [2, 0, 2, 1]
    assert ds.metainfo['classes'] == (11318, 11319, 11320)


def test_sop_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'SOPDataset: ann_file .*Ebay_train\.txt'):
        SOPDataset(data_root=str(tmp_path), split='train')


@pytest.mark.parametrize('text, line, what', [
    ('image_id class_id path\n1 1 1 a/1.JPG\n', 1, 'header'),
    ('image_id class_id super_class_id path\n1 1 1 a/1.JPG\n2 1 a/2.JPG\n', 3, '4 fields'),
    ('image_id class_id super_class_id path\n1 x 1 a/1.JPG\n', 2, 'integer class_id'),
])
def test_sop_malformed(tmp_path, text, line, what):
    path = write_file(tmp_path / 'Ebay_train.txt', text)
    with pytest.raises(ValueError, match=rf'Ebay_train\.txt, line {line}: expected .*{what}') as e:
        SOPDataset(data_root=str(tmp_path), split='train')
    assert path in str(e.value)


def test_sop_empty_split(tmp_path):
    write_file(tmp_path / 'Ebay_test.txt', 'image_id class_id super_class_id path\n')
    with pytest.raises(ValueError, match=r"split 'test' is empty"):
        SOPDataset(data_root=str(tmp_path), split='test')


def test_sop_bad_split(data_dir):
    with pytest.raises(ValueError, match=r"split must be one of \['train', 'test'\], got 'val'"):
        SOPDataset(data_root=osp.join(data_dir, 'sop'), split='val')
