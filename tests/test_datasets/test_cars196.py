import csv
import os.path as osp

import cv2
import numpy as np
import pytest
import scipy.io

from irtbox.datasets import Cars196Dataset


def mat_rows(root):
    """(path, bbox, class) of cars_annos.mat, read independently of the dataset."""
    ann = scipy.io.loadmat(osp.join(root, 'cars_annos.mat'), squeeze_me=True)['annotations']
    return [(str(a['relative_im_path']), [int(a[f]) for f in ('bbox_x1', 'bbox_y1', 'bbox_x2',
                                                              'bbox_y2')], int(a['class']))
            for a in ann]


def csv_rows(root):
    rows = []
    for name, folder in (('anno_train.csv', 'cars_train'), ('anno_test.csv', 'cars_test')):
        with open(osp.join(root, name)) as f:
            for r in csv.reader(f):
                rows.append((osp.join(folder, r[0]), [int(v) for v in r[1:5]], int(r[5])))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
@pytest.mark.parametrize('ann_format', ['mat', 'csv'])
def test_cars_parses_fixture(data_dir, split, ann_format):
    root = osp.join(data_dir, 'cars196')
    ds = Cars196Dataset(data_root=root, split=split, ann_format=ann_format)
    rows = mat_rows(root) if ann_format == 'mat' else csv_rows(root)
    keep = [r for r in rows if (r[2] <= 98) == (split == 'train')]
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    assert [d['img_path'] for d in infos] == [osp.join(root, r[0]) for r in keep]
    assert [d['bbox'] for d in infos] == [[x1 - 1, y1 - 1, x2, y2] for (x1, y1, x2, y2) in
                                          (r[1] for r in keep)]
    _, labels = np.unique([r[2] for r in keep], return_inverse=True)
    np.testing.assert_array_equal(ds.get_gt_labels(), labels)
    assert ds.metainfo['classes'] == tuple(sorted({r[2] for r in keep}))
    assert all((c <= 98) == (split == 'train') for c in ds.metainfo['classes'])
    assert ds.num_classes == 5 and all(osp.isfile(d['img_path']) for d in infos)


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_cars_formats_agree(data_dir, split):
    root = osp.join(data_dir, 'cars196')
    a = Cars196Dataset(data_root=root, split=split, ann_format='mat')
    b = Cars196Dataset(data_root=root, split=split, ann_format='csv')

    def content(ds):
        # the same image in both layouts: compare by pixels, box and label
        return sorted((cv2.imread(d['img_path']).tobytes(), tuple(d['bbox']), d['gt_label'])
                      for d in (ds.get_data_info(i) for i in range(len(ds))))

    assert a.metainfo['classes'] == b.metainfo['classes'] and len(a) == len(b)
    assert content(a) == content(b)


@pytest.mark.slow
def test_cars_auto_format(data_dir, tmp_path):
    root = osp.join(data_dir, 'cars196')
    assert Cars196Dataset(data_root=root).resolved_format() == 'mat'
    for name in ('anno_train.csv', 'anno_test.csv'):
        (tmp_path / name).write_text(open(osp.join(root, name)).read())
    ds = Cars196Dataset(data_root=str(tmp_path), lazy_init=True)
    assert ds.resolved_format() == 'csv'
    (tmp_path / 'anno_test.csv').unlink()
    with pytest.raises(FileNotFoundError, match=r'neither .*cars_annos\.mat.*anno_test\.csv'):
        Cars196Dataset(data_root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r'Cars196Dataset: csv_files .*anno_test\.csv'):
        Cars196Dataset(data_root=str(tmp_path), ann_format='csv')
    with pytest.raises(ValueError, match='ann_format must be one of'):
        Cars196Dataset(data_root=root, ann_format='json')


def test_cars_csv_malformed(tmp_path):
    (tmp_path / 'anno_test.csv').write_text('00001.jpg,1,2,3,4,150\n')
    (tmp_path / 'anno_train.csv').write_text('00001.jpg,1,2,3,4,1\n\n00002.jpg,1,2,3,4\n')
    with pytest.raises(ValueError, match=r"anno_train\.csv, line 3: expected 6 comma-separated"):
        Cars196Dataset(data_root=str(tmp_path), ann_format='csv')
    (tmp_path / 'anno_train.csv').write_text('00001.jpg,1,2,3,4,1\n00002.jpg,1,2,x,4,1\n')
    with pytest.raises(ValueError, match=r'anno_train\.csv, line 2: expected an integer x2'):
        Cars196Dataset(data_root=str(tmp_path), ann_format='csv')


def write_mat(path, **fields):
    names = list(fields)
    ann = np.zeros((1, 1), dtype=[(f, 'O') for f in names])
    ann[0, 0] = tuple(fields.values())
    scipy.io.savemat(str(path), dict(annotations=ann))


def test_cars_mat_malformed(tmp_path):
    path = tmp_path / 'cars_annos.mat'
    good = dict(relative_im_path=np.array(['car_ims/000001.jpg']), bbox_x1=np.array([[1]]),
                bbox_y1=np.array([[1]]), bbox_x2=np.array([[5]]), bbox_y2=np.array([[5]]),
                test=np.array([[0]]))
    write_mat(path, **good)
    with pytest.raises(ValueError, match=r"cars_annos\.mat: expected a struct array "
                       r"'annotations' .*missing \['class'\]"):
        Cars196Dataset(data_root=str(tmp_path))
    write_mat(path, **good, **{'class': np.array([[1.5]])})
    with pytest.raises(ValueError, match=r'cars_annos\.mat, annotations\[0\]: expected an '
                       r'integer class, got 1\.5'):
        Cars196Dataset(data_root=str(tmp_path))
    write_mat(path, **good, **{'class': np.array([[1, 2]])})
    with pytest.raises(ValueError, match=r'annotations\[0\]: expected one value in class'):
        Cars196Dataset(data_root=str(tmp_path))
    path.write_text('not a mat file')
    with pytest.raises(ValueError, match=r'cars_annos\.mat: not a readable MATLAB file'):
        Cars196Dataset(data_root=str(tmp_path))
    write_mat(path, **good, **{'class': np.array([[1]])})
    with pytest.raises(ValueError, match=r"Cars196Dataset: split 'test' is empty"):
        Cars196Dataset(data_root=str(tmp_path), split='test')
