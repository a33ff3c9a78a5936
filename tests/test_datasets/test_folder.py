import glob
import os
import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import FolderDataset


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_folder_parses_fixture(data_dir, split):
    root = osp.join(data_dir, 'folder')
    ds = FolderDataset(data_root=root, split=split)
    files = sorted(glob.glob(osp.join(root, split, '*', '*')))
    names = [osp.basename(osp.dirname(f)) for f in files]
    assert sorted(ds.get_data_info(i)['img_path'] for i in range(len(ds))) == files
    assert ds.metainfo['classes'] == tuple(sorted(set(names)))
    by_path = {ds.get_data_info(i)['img_path']: ds.get_data_info(i)['gt_label']
               for i in range(len(ds))}
    _, labels = np.unique(names, return_inverse=True)
    assert [by_path[f] for f in files] == labels.tolist()
    assert ds.num_classes >= 4 and np.bincount(labels).min() >= 2


def touch(path):
    os.makedirs(osp.dirname(path), exist_ok=True)
    open(path, 'wb').close()


@pytest.mark.slow
def test_folder_without_split(tmp_path):
    for rel in ['b/1.JPG', 'b/sub/2.png', 'a/3.jpeg', 'a/notes.txt', 'c/4.webp']:
        touch(str(tmp_path / rel))
    ds = FolderDataset(data_root=str(tmp_path))
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [osp.relpath(d['img_path'], tmp_path) for d in infos] == [
        'a/3.jpeg', 'b/1.JPG', 'b/sub/2.png', 'c/4.webp']  # non-images ignored, sub-folders read
    assert [d['gt_label'] for d in infos] == [0, 1, 1, 2]


def test_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"FolderDataset: folder .*/train' not found"):
        FolderDataset(data_root=str(tmp_path), split='train')
    touch(str(tmp_path / 'loose.jpg'))
    with pytest.raises(ValueError, match=r'no class folders in'):
        FolderDataset(data_root=str(tmp_path))
    touch(str(tmp_path / 'a' / '1.jpg'))
    touch(str(tmp_path / 'b' / 'readme.md'))
    with pytest.raises(ValueError, match=r"class folders without images .* \['b'\]"):
        FolderDataset(data_root=str(tmp_path))
