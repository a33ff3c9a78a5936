"""Annotation files in the official formats: every bad line is an error naming the file and
line; a query without a positive in the gallery is counted in a warning."""
import re

import pytest

from irtbox.datasets import CSVDataset, CUBDataset, InShopDataset, SOPDataset

SOP_HEADER = 'image_id class_id super_class_id path\n'


def raises_at(path, line, message=''):
    return pytest.raises(ValueError, match=re.escape(f'{path}, line{line}') + '.*' + message)


def csv_dataset(tmp_path, body: bytes, split='train'):
    (tmp_path / 'a.csv').write_bytes(b'path,label,split\n' + body)
    return CSVDataset(data_root=str(tmp_path), ann_file='a.csv', split=split)


def test_csv_non_utf8_names_file_and_line(tmp_path):
    with raises_at(tmp_path / 'a.csv', ' 3, column 2', 'not UTF-8'):
        csv_dataset(tmp_path, b'a.png,1,train\nb\xe9.png,2,train\n')


@pytest.mark.parametrize('label', ['', 'NaN', 'nan'])
def test_csv_empty_or_nan_label(label, tmp_path):
    with raises_at(tmp_path / 'a.csv', ' 3', 'non-empty path and label'):
        csv_dataset(tmp_path, f'a.png,1,train\nb.png,{label},train\n'.encode())


def test_csv_same_path_two_labels_names_both_lines(tmp_path):
    # Before: both rows became samples, the image in two classes.
    with raises_at(tmp_path / 'a.csv', 's 2 and 4', "'./a.png' has the label '1' on line 2 and "
                   "'2' on line 4"):
        csv_dataset(tmp_path, b'a.png,1,train\nb.png,1,train\n./a.png,2,test\n')
    # The same row twice, same label: an image counted twice in every metric; refused too.
    with raises_at(tmp_path / 'a.csv', 's 2 and 3', "'a.png' is listed twice"):
        csv_dataset(tmp_path, b'a.png,1,train\na.png,1,train\n')


def sop(tmp_path, train, test=None, split='train'):
    (tmp_path / 'Ebay_train.txt').write_text(SOP_HEADER + train)
    if test is not None:
        (tmp_path / 'Ebay_test.txt').write_text(SOP_HEADER + test)
    return SOPDataset(data_root=str(tmp_path), split=split)


def test_sop_duplicate_image_id(tmp_path):
    with raises_at(tmp_path / 'Ebay_train.txt', ' 4', r'a new image_id \(2 is on line 3'):
        sop(tmp_path, '1 1 1 a/1.jpg\n2 1 1 a/2.jpg\n2 2 1 a/3.jpg\n')


@pytest.mark.slow
@pytest.mark.parametrize('split', ['train', 'test'])
def test_sop_class_in_train_and_test(split, tmp_path):
    # Before: accepted; the "unseen classes" test would have seen class 7 in training.
    train, test = '1 1 1 a/1.jpg\n2 7 1 a/2.jpg\n', '1 7 1 b/1.jpg\n2 9 1 b/2.jpg\n'
    name, line, other = ('Ebay_train.txt', 3, 'Ebay_test.txt (line 2)') if split == 'train' \
        else ('Ebay_test.txt', 2, 'Ebay_train.txt (line 3)')
    with raises_at(tmp_path / name, f' {line}', f'class_id 7 is also in .*{re.escape(other)}'):
        sop(tmp_path, train, test, split)
    assert len(sop(tmp_path, train, test.replace(' 7 ', ' 8 '), split)) == 2


@pytest.mark.parametrize('class_id', ['999', '-5', '0'])
def test_cub_class_id_out_of_range(class_id, tmp_path):
    (tmp_path / 'images.txt').write_text('1 001.a/1.jpg\n2 001.a/2.jpg\n3 150.b/3.jpg\n')
    (tmp_path / 'image_class_labels.txt').write_text(f'1 1\n2 {class_id}\n3 150\n')
    # Before: -5 silently became a training image, 999 a test image.
    with raises_at(tmp_path / 'image_class_labels.txt', ' 2', re.escape('a class_id in 1 .. 200')):
        len(CUBDataset(data_root=str(tmp_path), split='train'))


@pytest.mark.slow
def test_inshop_query_without_positive_is_counted(tmp_path, monkeypatch):
    from irtbox.datasets import base_dataset
    logged = []
    monkeypatch.setattr(base_dataset, 'print_log', lambda msg, **kwargs: logged.append(msg))
    (tmp_path / 'Eval').mkdir()
    (tmp_path / 'Eval' / 'list_eval_partition.txt').write_text(
        '4\nimage_name item_id evaluation_status\n'
        'img/1.jpg id_1 query\nimg/2.jpg id_1 gallery\nimg/3.jpg id_2 query\n'
        'img/4.jpg id_3 gallery\n')
    InShopDataset(data_root=str(tmp_path), split='test').get_gt_labels()
    # Before: nothing said; Recall@K counted the query as a miss, MAP@R dropped it.
    assert len(logged) == 1
    assert "1 of 2 queries of split 'test'" in logged[0] and 'list_eval_partition.txt' in logged[0]
    assert 'Recall@K counts each of them as a miss' in logged[0]


@pytest.mark.parametrize('fmt', ['sop', 'cub', 'inshop'])
def test_list_file_same_path_two_labels(fmt, tmp_path):
    if fmt == 'sop':
        name, make = 'Ebay_train.txt', lambda: sop(tmp_path, '1 1 1 a/1.jpg\n2 2 1 a/1.jpg\n')
    elif fmt == 'cub':
        (tmp_path / 'images.txt').write_text('1 001.a/1.jpg\n2 001.a/1.jpg\n')
        (tmp_path / 'image_class_labels.txt').write_text('1 1\n2 2\n')
        name, make = 'images.txt', lambda: len(CUBDataset(data_root=str(tmp_path), split='train'))
    else:
        (tmp_path / 'Eval').mkdir()
        (tmp_path / 'Eval' / 'list_eval_partition.txt').write_text(
            '2\nimage_name item_id evaluation_status\nimg/1.jpg id_1 train\nimg/1.jpg id_2 train\n')
        name = 'Eval/list_eval_partition.txt'
        make = lambda: InShopDataset(data_root=str(tmp_path), split='train')  # noqa: E731
    lines = {'sop': (2, 3), 'cub': (1, 2), 'inshop': (3, 4)}[fmt]
    with raises_at(tmp_path / name, f's {lines[0]} and {lines[1]}', 'one image, one label'):
        make()
