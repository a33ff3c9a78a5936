import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import CUBDataset


def read_lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def write_file(path, text):
    path.write_text(text)
    return str(path)


def expected(root, split, num_train_classes=100):
    paths = dict(line.split() for line in read_lines(osp.join(root, 'images.txt')))
    classes = {k: int(v) for k, v in
               (line.split() for line in read_lines(osp.join(root, 'image_class_labels.txt')))}
    keep = [k for k in paths if (classes[k] <= num_train_classes) == (split == 'train')]
    _, labels = np.unique([classes[k] for k in keep], return_inverse=True)
    return [osp.join(root, 'images', paths[k]) for k in keep], labels, {classes[k] for k in keep}


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_cub_parses_fixture(data_dir, split):
    root = osp.join(data_dir, 'cub')
    ds = CUBDataset(data_root=root, split=split)
    paths, labels, class_ids = expected(root, split)
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == paths
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert set(ds.metainfo['classes']) == class_ids
    assert ds.num_classes >= 4
    assert all(osp.isfile(p) for p in paths)
    # the split is by class: 1..100 train, 101..200 test
    assert all((c <= 100) == (split == 'train') for c in class_ids)


@pytest.mark.slow
def test_cub_num_train_classes(data_dir):
    root = osp.join(data_dir, 'cub')
    ds = CUBDataset(data_root=root, split='train', num_train_classes=3)
    assert ds.metainfo['classes'] == (1, 2, 3)
    assert len(ds) == len(expected(root, 'train', 3)[0])


def test_cub_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'CUBDataset: ann_file .*images\.txt'):
        CUBDataset(data_root=str(tmp_path))
    write_file(tmp_path / 'images.txt', '1 001.A/a.jpg\n')
    with pytest.raises(FileNotFoundError, match=r'CUBDataset: label_file .*image_class_labels'):
        CUBDataset(data_root=str(tmp_path))


def test_cub_malformed(tmp_path):
    write_file(tmp_path / 'images.txt', '1 001.A/a.jpg\n2 001.A/b.jpg\n')
    write_file(tmp_path / 'image_class_labels.txt', '1 1\n\n2 1 extra\n')
    with pytest.raises(ValueError, match=r"image_class_labels\.txt, line 3: expected 2 fields"):
        CUBDataset(data_root=str(tmp_path))
    write_file(tmp_path / 'image_class_labels.txt', '1 1\n2 one\n')
    with pytest.raises(ValueError, match=r'image_class_labels\.txt, line 2: expected an integer'):
        CUBDataset(data_root=str(tmp_path))
    write_file(tmp_path / 'image_class_labels.txt', '1 1\n')
    with pytest.raises(ValueError, match=r'image_class_labels\.txt: no class for image_id 2 '
                       r'\(.*images\.txt, line 2\)'):
        CUBDataset(data_root=str(tmp_path))


def test_cub_empty_split(tmp_path):
    write_file(tmp_path / 'images.txt', '1 001.A/a.jpg\n')
    write_file(tmp_path / 'image_class_labels.txt', '1 1\n')
    with pytest.raises(ValueError, match=r"CUBDataset: split 'test' is empty"):
        CUBDataset(data_root=str(tmp_path), split='test')
