import os.path as osp

import numpy as np
import pytest

from irtbox.datasets import NCCleanDataset


def write_file(path, text):
    path.write_text(text)
    return str(path)


def lines(root, split):
    with open(osp.join(root, f'annotation_clean_{split}.txt')) as f:
        return [line.split() for line in f if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'val'])
def test_parses_fixture(data_dir, split):
    root = osp.join(data_dir, 'gld', 'nc_clean')
    ds = NCCleanDataset(data_root=root, split=split)
    expected = lines(root, split)
    names, labels = np.unique([label for _, label in expected], return_inverse=True)
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == \
        [osp.join(root, 'images', url.rsplit('/', 1)[1]) for url, _ in expected]
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.metainfo['classes'] == tuple(names)


@pytest.mark.slow
def test_skip_missing(data_dir):
    root = osp.join(data_dir, 'gld', 'nc_clean')
    full = NCCleanDataset(data_root=root)
    ds = NCCleanDataset(data_root=root, skip_missing=True)
    paths = [full.get_data_info(i)['img_path'] for i in range(len(full))]
    kept = [p for p in paths if osp.isfile(p)]
    assert len(kept) == len(paths) - 1
    assert [ds.get_data_info(i)['img_path'] for i in range(len(ds))] == kept


@pytest.mark.slow
def test_paths_integer_labels_and_escaped_urls(tmp_path):
    write_file(tmp_path / 'annotation_clean_train.txt',
               'http://a.org/x/p%20q.jpg?size=2 10\n'
               'sub/local.jpg 9\n'
               'https://b.org/y/z.jpg 10\n')
    ds = NCCleanDataset(data_root=str(tmp_path), data_prefix=dict(img_path='ims'))
    assert [ds.get_data_info(i)['img_path'] for i in range(3)] == [
        osp.join(str(tmp_path), 'ims', n) for n in ('p q.jpg', 'sub/local.jpg', 'z.jpg')]
    assert ds.get_gt_labels().tolist() == [1, 0, 1]  # 9 before 10: numeric order
    assert ds.metainfo['classes'] == (9, 10)


@pytest.mark.parametrize('text, line, what', [
    ('http://a.org/1.jpg 1\nhttp://a.org/2.jpg\n', 2, '2 space-separated fields'),
    ('http://a.org/1.jpg 1 2\n', 1, '2 space-separated fields'),
    ('http://a.org/ 1\n', 1, 'a URL ending with a file name'),
])
def test_malformed_lines(tmp_path, text, line, what):
    path = write_file(tmp_path / 'annotation_clean_train.txt', text)
    with pytest.raises(ValueError, match=f'{path}, line {line}: expected {what}'):
        NCCleanDataset(data_root=str(tmp_path))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'NCCleanDataset: ann_file .*annotation_clean_val'):
        NCCleanDataset(data_root=str(tmp_path), split='val')
