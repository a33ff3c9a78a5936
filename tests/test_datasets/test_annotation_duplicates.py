"""Reliability round three, datasets: an image listed twice in one split is an error naming
both lines (it would count twice in every metric); labels are strings unless the format says
integers (``05`` is not ``5``); annotation text files may start with a UTF-8 byte-order mark."""
import os.path as osp
import pickle
import re
import shutil

import numpy as np
import pytest
import scipy.io

from irtbox.datasets import (Cars196Dataset, CSVDataset, CUBDataset, FolderDataset,
                             GLDv1NoisyDataset, INaturalist2018Dataset, InShopDataset,
                             NCCleanDataset, RevisitedDataset, SOPDataset, base_dataset)

BOM = '\ufeff'


def listed_twice(path, first, second, image, rest=''):
    """pytest.raises for the duplicate error, naming the file and both lines."""
    return pytest.raises(ValueError, match=re.escape(
        f'{path}, lines {first} and {second}: {image!r} is listed twice{rest}'))


@pytest.fixture
def warnings_logged(monkeypatch):
    logged = []
    monkeypatch.setattr(base_dataset, 'print_log', lambda msg, **kwargs: logged.append(msg))
    return logged


# ------------------------------------------------------------------- CSV (user's own data)
def csv_copy(tmp_path, data_dir, extra=''):
    """The CSV fixture (25 lines, test rows on lines 14..25) copied with ``extra`` appended."""
    src = osp.join(data_dir, 'csv')
    shutil.copytree(osp.join(src, 'images'), tmp_path / 'images')
    with open(osp.join(src, 'annotations.csv'), encoding='utf-8') as f:
        text = f.read()
    path = tmp_path / 'annotations.csv'
    path.write_text(text + extra, encoding='utf-8')
    return path


@pytest.mark.slow
def test_csv_row_appended_again_is_an_error(tmp_path, data_dir):
    # The report: images/puma_0.png (a test query, line 14) appended once more; Recall@1
    # went from 33.3 to 42.1 (the query found its own copy), with no warning.
    path = csv_copy(tmp_path, data_dir, 'images/puma_0.png,puma,test,true\n')
    with listed_twice(path, 14, 26, 'images/puma_0.png',
                      " in split 'test' (label 'puma' both times); expected each image once"):
        CSVDataset(data_root=str(tmp_path), ann_file='annotations.csv', split='test')
    # The other split is not affected, and the fixture itself loads.
    assert len(CSVDataset(data_root=str(tmp_path), ann_file='annotations.csv',
                          split='train')) == 12
    csv_copy(tmp_path / 'clean', data_dir)
    assert len(CSVDataset(data_root=str(tmp_path / 'clean'), ann_file='annotations.csv',
                          split='test')) == 12


def test_csv_same_image_spelled_two_ways(tmp_path):
    (tmp_path / 'a.csv').write_text('path,label\na.png,1\nb.png,1\n./a.png,1\n')
    with listed_twice(tmp_path / 'a.csv', 2, 4, './a.png', " (label '1' both times)"):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv')


@pytest.mark.slow
def test_csv_same_image_in_two_splits(tmp_path):
    # One image in two splits with one label: each split lists it once (allowed); read as
    # one set (split=None) it is there twice.
    (tmp_path / 'a.csv').write_text('path,label,split\na.png,1,train\nb.png,1,train\n'
                                    'a.png,1,test\n')
    assert len(CSVDataset(data_root=str(tmp_path), ann_file='a.csv', split='test')) == 1
    with listed_twice(tmp_path / 'a.csv', 2, 4, 'a.png'):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv')


@pytest.mark.slow
def test_csv_labels_stay_strings(tmp_path, warnings_logged):
    (tmp_path / 'a.csv').write_text('path,label\na.png,05\nb.png,5\nc.png,5\nd.png,10\n')
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv')
    # Before: both became int 5, one class, silently.
    assert ds.metainfo['classes'] == ('05', '5', '10')  # numeric order, '05' before '5'
    assert ds.get_gt_labels().tolist() == [0, 1, 1, 2]
    assert len(warnings_logged) == 1
    assert warnings_logged[0].startswith(
        f"{tmp_path / 'a.csv'}, lines 2 and 3: the labels '05' and '5' are two different "
        "classes (a label is its text); if they are one class, set label_type='int'")
    ds = CSVDataset(data_root=str(tmp_path), ann_file='a.csv', label_type='int')
    assert ds.metainfo['classes'] == (5, 10)
    assert ds.get_gt_labels().tolist() == [0, 0, 0, 1]
    assert len(warnings_logged) == 1  # declared integers: no warning


def test_csv_label_type_int_needs_integers(tmp_path):
    (tmp_path / 'a.csv').write_text('path,label\na.png,5\nb.png,cat\n')
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'a.csv'}, line 3: expected an integer label (label_type='int'), "
            "got 'b.png,cat'")):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv', label_type='int')
    with pytest.raises(ValueError, match=r"label_type must be one of \['str', 'int'\], "
                       r"got 'float'"):
        CSVDataset(data_root=str(tmp_path), ann_file='a.csv', label_type='float')


@pytest.mark.slow
def test_csv_with_byte_order_mark(tmp_path, data_dir):
    # Excel's "CSV UTF-8" starts with a BOM. Before: "line 1: expected a header with the
    # columns path,label[,split][,is_query], got '\ufeffpath,label,split,is_query'".
    path = csv_copy(tmp_path, data_dir)
    path.write_text(BOM + path.read_text(encoding='utf-8'), encoding='utf-8')
    (tmp_path / 'junk.csv').write_text(BOM + 'query_path,gallery_path\n'
                                       'images/puma_0.png,images/puma_1.png\n',
                                       encoding='utf-8')
    ds = CSVDataset(data_root=str(tmp_path), ann_file='annotations.csv', split='test',
                    junk_file='junk.csv')
    assert len(ds) == 12 and ds.metainfo['classes'][0] == 'puma'
    assert ds.metainfo['junk'] == {0: [1]}


# ------------------------------------------------------------------------- folder
@pytest.mark.slow
def test_folder_05_and_5_are_two_classes(tmp_path, warnings_logged):
    for name in ('05', '5'):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'a.png').write_bytes(b'')
    ds = FolderDataset(data_root=str(tmp_path))
    assert ds.metainfo['classes'] == ('05', '5') and ds.get_gt_labels().tolist() == [0, 1]
    assert len(warnings_logged) == 1
    assert f"{tmp_path}, folder '05' and folder '5': the class folder names '05' and '5' " \
           'are two different classes' in warnings_logged[0]


# ---------------------------------------------------------------- official list formats
SOP_HEADER = 'image_id class_id super_class_id path\n'


def test_sop_path_twice(tmp_path):
    (tmp_path / 'Ebay_train.txt').write_text(SOP_HEADER + '1 1 1 a/1.jpg\n2 1 1 a/2.jpg\n'
                                             '3 1 1 a/1.jpg\n')
    with listed_twice(tmp_path / 'Ebay_train.txt', 2, 4, 'a/1.jpg', " in split 'train'"):
        SOPDataset(data_root=str(tmp_path))


@pytest.mark.slow
def test_sop_byte_order_mark(tmp_path, data_dir):
    for name in ('Ebay_train.txt', 'Ebay_test.txt'):
        with open(osp.join(data_dir, 'sop', name), encoding='utf-8') as f:
            (tmp_path / name).write_text(BOM + f.read(), encoding='utf-8')
    expected = SOPDataset(data_root=osp.join(data_dir, 'sop'), split='test')
    ds = SOPDataset(data_root=str(tmp_path), split='test')
    np.testing.assert_array_equal(ds.get_gt_labels(), expected.get_gt_labels())


def test_cub_path_twice(tmp_path):
    (tmp_path / 'images.txt').write_text('1 001.a/1.jpg\n2 001.a/2.jpg\n3 001.a/1.jpg\n')
    (tmp_path / 'image_class_labels.txt').write_text('1 1\n2 1\n3 1\n')
    with listed_twice(tmp_path / 'images.txt', 1, 3, '001.a/1.jpg'):
        len(CUBDataset(data_root=str(tmp_path), split='train'))


def test_inshop_query_also_in_gallery(tmp_path):
    (tmp_path / 'Eval').mkdir()
    path = tmp_path / 'Eval' / 'list_eval_partition.txt'
    path.write_text('3\nimage_name item_id evaluation_status\n'
                    'img/1.jpg id_1 query\nimg/2.jpg id_1 gallery\nimg/1.jpg id_1 gallery\n')
    with listed_twice(path, 3, 5, 'img/1.jpg'):
        InShopDataset(data_root=str(tmp_path), split='test')


def test_cars196_csv_line_twice(tmp_path):
    (tmp_path / 'anno_train.csv').write_text('1.jpg,1,1,9,9,1\n2.jpg,1,1,9,9,1\n')
    (tmp_path / 'anno_test.csv').write_text('1.jpg,1,1,9,9,1\n2.jpg,1,1,9,9,1\n'
                                            '1.jpg,1,1,9,9,1\n')
    with listed_twice(tmp_path / 'anno_test.csv', 1, 3, osp.join('cars_test', '1.jpg')):
        Cars196Dataset(data_root=str(tmp_path), ann_format='csv')


def test_cars196_mat_entry_twice(tmp_path, data_dir):
    mat = scipy.io.loadmat(osp.join(data_dir, 'cars196', 'cars_annos.mat'))
    ann = mat['annotations']
    scipy.io.savemat(tmp_path / 'cars_annos.mat',
                     dict(annotations=np.concatenate([ann, ann[:, 1:2]], axis=1)))
    last = ann.shape[1]
    image = str(np.asarray(ann[0, 1]['relative_im_path']).reshape(-1)[0])
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'cars_annos.mat'}, annotations[1] and annotations[{last}]: "
            f'{image!r} is listed twice')):
        Cars196Dataset(data_root=str(tmp_path), ann_format='mat')


def test_inaturalist_line_twice_and_two_spellings(tmp_path):
    path = tmp_path / 'Inaturalist_train_set1.txt'
    path.write_text('t/Aves/5/a.jpg\nt/Aves/5/b.jpg\nt/Aves/5/a.jpg\n')
    with listed_twice(path, 1, 3, 't/Aves/5/a.jpg'):
        INaturalist2018Dataset(data_root=str(tmp_path))
    # Category ids are integers by format; '05' and '5' would merge two folders silently.
    path.write_text('t/Aves/5/a.jpg\nt/Aves/05/b.jpg\n')
    with pytest.raises(ValueError, match=re.escape(
            f"{path}, lines 1 and 2: the category folders '5' and '05' are the same "
            'integer 5 written two ways')):
        INaturalist2018Dataset(data_root=str(tmp_path))


@pytest.mark.slow
def test_gldv1_id_twice_and_byte_order_mark(tmp_path):
    path = tmp_path / 'train.csv'
    path.write_text(BOM + 'id,url,landmark_id\nab12,http://x/1.jpg,3\ncd34,http://x/2.jpg,3\n'
                    'ab12,http://x/1.jpg,3\n', encoding='utf-8')
    with listed_twice(path, 2, 4, 'ab12.jpg'):
        GLDv1NoisyDataset(data_root=str(tmp_path))
    path.write_text(BOM + 'id,url,landmark_id\nab12,http://x/1.jpg,3\n', encoding='utf-8')
    assert len(GLDv1NoisyDataset(data_root=str(tmp_path))) == 1


def test_nc_clean_two_urls_one_file_and_two_spellings(tmp_path):
    path = tmp_path / 'annotation_clean_train.txt'
    path.write_text('http://a.org/x/1.jpg 4\nhttp://a.org/x/2.jpg 4\nhttp://b.org/y/1.jpg 4\n')
    with listed_twice(path, 1, 3, '1.jpg'):
        NCCleanDataset(data_root=str(tmp_path))
    path.write_text('http://a.org/x/1.jpg 04\nhttp://a.org/x/2.jpg 4\n')
    with pytest.raises(ValueError, match=re.escape(
            f"{path}, lines 1 and 2: the labels '04' and '4' are the same integer 4")):
        NCCleanDataset(data_root=str(tmp_path))


# ------------------------------------------------------------------- revisited (+R1M)
@pytest.mark.slow
def test_revisited_distractor_twice_and_byte_order_mark(tmp_path, data_dir):
    root = osp.join(data_dir, 'landmarks', 'roxford5k')
    r1m = osp.join(data_dir, 'landmarks', 'revisitop1m')
    with open(osp.join(r1m, 'revisitop1m.txt'), encoding='utf-8') as f:
        rel = [line.strip() for line in f if line.strip()]
    listed = tmp_path / 'list.txt'
    listed.write_text(BOM + '\n'.join(rel) + '\n', encoding='utf-8')
    ds = RevisitedDataset(data_root=root, distractors_list=str(listed),
                          distractors_root=osp.join(r1m, 'jpg'))
    assert ds.metainfo['num_distractors'] == len(rel)
    assert ds.get_data_info(len(ds) - len(rel))['img_path'] == osp.join(r1m, 'jpg', rel[0])
    listed.write_text('\n'.join(rel + [rel[1]]) + '\n', encoding='utf-8')
    with listed_twice(listed, 2, len(rel) + 1, rel[1]):
        RevisitedDataset(data_root=root, distractors_list=str(listed),
                         distractors_root=osp.join(r1m, 'jpg'))


def test_revisited_imlist_name_twice(tmp_path, data_dir):
    root = osp.join(data_dir, 'landmarks', 'roxford5k')
    dst = tmp_path / 'data'
    shutil.copytree(root, dst)
    with open(dst / 'gnd_roxford5k.pkl', 'rb') as f:
        data = pickle.load(f)
    data['imlist'] = list(data['imlist']) + [data['imlist'][0]]
    with open(dst / 'gnd_roxford5k.pkl', 'wb') as f:
        pickle.dump(data, f)
    last = len(data['imlist']) - 1
    with pytest.raises(ValueError, match=re.escape(
            f"{dst / 'gnd_roxford5k.pkl'}, imlist[0] and imlist[{last}]: "
            f"{data['imlist'][0]!r} is listed twice")):
        RevisitedDataset(data_root=str(dst))
