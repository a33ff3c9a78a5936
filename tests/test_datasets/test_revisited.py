"""RevisitedDataset: ROxford5k / RParis6k (+R1M) in the official layout."""
import math
import os.path as osp
import pickle
import shutil

import cv2
import numpy as np
import pytest

from irtbox.datasets import RevisitedDataset
from irtbox.apis import register_all_modules

register_all_modules()


@pytest.fixture
def root(data_dir):
    return osp.join(data_dir, 'landmarks', 'roxford5k')


@pytest.fixture
def gnd_file(root):
    with open(osp.join(root, 'gnd_roxford5k.pkl'), 'rb') as f:
        return pickle.load(f)


def copy_with(tmp_path, root, name='roxford5k', **changes):
    """A copy of the fixture whose pickle has ``changes`` applied (a key set to
    None is removed)."""
    dst = tmp_path / 'data'
    shutil.copytree(root, dst)
    with open(osp.join(root, 'gnd_roxford5k.pkl'), 'rb') as f:
        data = pickle.load(f)
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    (dst / 'gnd_roxford5k.pkl').unlink()
    with open(dst / f'gnd_{name}.pkl', 'wb') as f:
        pickle.dump(data, f)
    return str(dst)


@pytest.mark.slow
def test_queries_first_then_database(root, gnd_file):
    ds = RevisitedDataset(data_root=root)
    nq, nd = len(gnd_file['qimlist']), len(gnd_file['imlist'])
    assert len(ds) == nq + nd
    infos = [ds.get_data_info(i) for i in range(len(ds))]
    names = gnd_file['qimlist'] + gnd_file['imlist']
    assert [d['img_path'] for d in infos] == [osp.join(root, 'jpg', n + '.jpg') for n in names]
    assert all(osp.isfile(d['img_path']) for d in infos)
    assert [d['is_query'] for d in infos] == [True] * nq + [False] * nd
    for q in range(nq):
        assert infos[q]['bbox'] == pytest.approx(gnd_file['gnd'][q]['bbx'])
    assert all('bbox' not in d and 'gt_label' not in d for d in infos[nq:])
    assert ds.get_query_mask().tolist() == [True] * nq + [False] * nd


@pytest.mark.slow
def test_metainfo_carries_ground_truth(root, gnd_file):
    meta = RevisitedDataset(data_root=root).metainfo
    assert meta['dataset_name'] == 'roxford5k'
    assert (meta['num_queries'], meta['num_database'], meta['num_distractors']) == (
        len(gnd_file['qimlist']), len(gnd_file['imlist']), 0)
    assert len(meta['gnd']) == len(gnd_file['gnd'])
    for got, raw in zip(meta['gnd'], gnd_file['gnd']):
        for key in ('easy', 'hard', 'junk'):
            assert got[key] == list(raw[key])
        assert got['bbx'] == pytest.approx(raw['bbx'])


@pytest.mark.slow
def test_distractors_are_appended(root, data_dir, gnd_file):
    # R1M's layout: revisitop1m.txt beside jpg/, listing paths relative to jpg/.
    r1m = osp.join(data_dir, 'landmarks', 'revisitop1m')
    jpg = osp.join(r1m, 'jpg')
    with open(osp.join(r1m, 'revisitop1m.txt')) as f:
        rel = [line.strip() for line in f if line.strip()]
    assert len(rel) == 4  # make_landmark_fixtures.py writes 4 distractors
    nq, nd = len(gnd_file['qimlist']), len(gnd_file['imlist'])
    # The list given by its own path, or relative to distractors_root.
    for listed in (osp.join(r1m, 'revisitop1m.txt'), osp.join('..', 'revisitop1m.txt')):
        ds = RevisitedDataset(data_root=root, distractors_list=listed, distractors_root=jpg)
        assert len(ds) == nq + nd + len(rel)
        tail = [ds.get_data_info(i) for i in range(nq + nd, len(ds))]
        assert [d['img_path'] for d in tail] == [osp.join(jpg, p) for p in rel]
        assert all(osp.isfile(d['img_path']) for d in tail)
        assert not any(d['is_query'] for d in tail)
        assert ds.metainfo['num_distractors'] == len(rel)
        assert ds.metainfo['num_database'] == nd


@pytest.mark.slow
def test_query_is_cropped_to_its_box_before_resizing(root, gnd_file):
    pipeline = [dict(type='LoadImageFromFile'), dict(type='CropBBox'),
                dict(type='PackRetrievalInputs')]
    ds = RevisitedDataset(data_root=root, pipeline=pipeline)
    for q, name in enumerate(gnd_file['qimlist']):
        full = cv2.imread(osp.join(root, 'jpg', name + '.jpg'))
        x1, y1, x2, y2 = (int(math.floor(v + 0.5)) for v in gnd_file['gnd'][q]['bbx'])
        out = ds[q]
        np.testing.assert_array_equal(out['inputs'].numpy().transpose(1, 2, 0),
                                      full[y1:y2, x1:x2])
        assert out['data_samples'].is_query
        assert out['data_samples'].sample_idx == q
    # Database images pass whole.
    db = ds[len(gnd_file['qimlist'])]
    assert tuple(db['inputs'].shape[1:]) == cv2.imread(
        osp.join(root, 'jpg', gnd_file['imlist'][0] + '.jpg')).shape[:2]
    assert 'gt_label' not in db['data_samples']


@pytest.mark.slow
def test_rparis6k_reads_its_own_pickle(tmp_path, root):
    data_root = copy_with(tmp_path, root, name='rparis6k')
    ds = RevisitedDataset(data_root=data_root, dataset_name='rparis6k')
    assert ds.metainfo['dataset_name'] == 'rparis6k'
    with pytest.raises(FileNotFoundError, match='gnd_roxford5k.pkl'):
        RevisitedDataset(data_root=data_root, dataset_name='roxford5k')


@pytest.mark.parametrize('changes, match', [
    (dict(imlist=None), "missing key.*'imlist'"),
    (dict(gnd=[]), "'gnd' must be a list with one dict per query"),
    (dict(qimlist=['a', 2, 'c']), r"'qimlist'\[1\]: expected a name"),
])
def test_bad_pickle_is_named(tmp_path, root, changes, match):
    data_root = copy_with(tmp_path, root, **changes)
    with pytest.raises((KeyError, ValueError), match=match) as info:
        RevisitedDataset(data_root=data_root)
    assert 'gnd_roxford5k.pkl' in str(info.value)


@pytest.mark.parametrize('key, value, match', [
    ('bbx', [10, 5, 3, 20], r"gnd\[1\]\['bbx'\]: expected \[x1, y1, x2, y2\]"),
    ('bbx', [1, 2, 3], r"gnd\[1\]\['bbx'\]"),
    ('easy', [0, 99], r"gnd\[1\]\['easy'\]\[1\] = 99 is not an index in \[0, 16\)"),
    ('junk', ['x'], r"gnd\[1\]\['junk'\]: expected integers"),
    ('hard', None, r"gnd\[1\]: missing key.*'hard'"),
])
def test_bad_query_entry_is_named(tmp_path, root, gnd_file, key, value, match):
    gnd = [dict(g) for g in gnd_file['gnd']]
    if value is None:
        del gnd[1][key]
    else:
        gnd[1][key] = value
    data_root = copy_with(tmp_path, root, gnd=gnd)
    with pytest.raises((KeyError, ValueError), match=match):
        RevisitedDataset(data_root=data_root)


def test_missing_files_and_bad_arguments(tmp_path, root, data_dir):
    with pytest.raises(FileNotFoundError, match='gnd_roxford5k.pkl'):
        RevisitedDataset(data_root=str(tmp_path))
    data_root = copy_with(tmp_path, root)
    shutil.rmtree(osp.join(data_root, 'jpg'))
    with pytest.raises(FileNotFoundError, match='image folder'):
        RevisitedDataset(data_root=data_root)
    with pytest.raises(ValueError, match="dataset_name must be one of"):
        RevisitedDataset(data_root=root, dataset_name='oxford5k')
    with pytest.raises(FileNotFoundError, match='distractors_list'):
        RevisitedDataset(data_root=root, distractors_list='nope.txt',
                         distractors_root=str(tmp_path))
    empty = tmp_path / 'empty.txt'
    empty.write_text('\n\n')
    with pytest.raises(ValueError, match='lists none'):
        RevisitedDataset(data_root=root, distractors_list=str(empty))
    with pytest.raises(ValueError, match='indices is not supported'):
        RevisitedDataset(data_root=root, indices=[0, 1])
