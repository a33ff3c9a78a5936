"""extract_features: the test pipeline exactly as tools/test.py applies it, files and arrays
alike, unreadable files skipped and listed."""
import logging
import os.path as osp
import shutil

import cv2
import numpy as np
import pytest
import torch
from mmengine.dataset import pseudo_collate
from mmengine.registry import DefaultScope

from irtbox.apis import extract_features, init_model, list_images
from irtbox.datasets import SOPDataset
from irtbox.utils.config import eval_pipeline

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
SOP = osp.join(ROOT, 'tests', 'data', 'sop')


@pytest.fixture(scope='module')
def model():
    torch.manual_seed(0)
    return init_model(TINY)


def test_equals_the_test_dataloader_path(model):
    with DefaultScope.overwrite_default_scope('irtbox'):
        dataset = SOPDataset(data_root=SOP, split='test', pipeline=eval_pipeline(model.cfg))
    paths = [dataset.get_data_info(i)['img_path'] for i in range(len(dataset))]
    batch = model.data_preprocessor(pseudo_collate([dataset[i] for i in range(len(dataset))]),
                                    False)
    with torch.no_grad():
        expected = model(batch['inputs'], mode='tensor').numpy()
    result = extract_features(model, paths, batch_size=3, progress=False)
    assert result.ids == paths and not result.failed
    np.testing.assert_allclose(result.embeddings, expected, atol=1e-6)
    assert result.embeddings.dtype == np.float32


def test_rgb_arrays_equal_files(model):
    paths = list_images(SOP)[:4]
    arrays = [cv2.cvtColor(cv2.imread(p), cv2.COLOR_BGR2RGB) for p in paths]
    from_files = extract_features(model, paths, progress=False)
    from_arrays = extract_features(model, arrays, progress=False)
    assert from_arrays.ids == [f'array:{i}' for i in range(4)]
    np.testing.assert_allclose(from_arrays.embeddings, from_files.embeddings, atol=1e-6)
    bgr = extract_features(model, [a[..., ::-1].copy() for a in arrays], progress=False)
    assert not np.allclose(bgr.embeddings, from_files.embeddings)  # the order matters


def test_unreadable_files_are_listed(model, tmp_path, monkeypatch):
    folder = tmp_path / 'photos'
    folder.mkdir()
    good = list_images(SOP)[:3]
    for i, path in enumerate(good):
        shutil.copy(path, folder / f'{i}.jpg')
    (folder / 'empty.jpg').write_bytes(b'')
    (folder / 'text.png').write_text('hello')
    with open(good[0], 'rb') as f:
        (folder / 'cut.jpg').write_bytes(f.read()[:200])
    (folder / 'readme.txt').write_text('not listed: not an image extension')
    import irtbox.apis.extract as extract_module
    logged = []
    monkeypatch.setattr(extract_module, 'print_log',
                        lambda msg, logger=None, level=logging.INFO: logged.append((level, msg)))
    result = extract_features(model, str(folder), progress=False, num_workers=2)
    failed = {osp.basename(path) for path, _ in result.failed}
    assert failed == {'empty.jpg', 'text.png', 'cut.jpg'}
    assert [osp.basename(i) for i in result.ids] == ['0.jpg', '1.jpg', '2.jpg']
    assert result.embeddings.shape == (3, 32)
    [(level, message)] = logged
    assert level == logging.WARNING and '3 of 6 images could not be read' in message
    assert all(name in message for name in failed)


def test_list_images_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match='image folder not found'):
        list_images(str(tmp_path / 'nowhere'))
    (tmp_path / 'a.txt').write_text('x')
    with pytest.raises(ValueError, match='no images'):
        list_images(str(tmp_path))
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'B.JPG').write_bytes(b'')
    (tmp_path / 'A.png').write_bytes(b'')
    assert list_images(str(tmp_path)) == [str(tmp_path / 'A.png'), str(tmp_path / 'sub' / 'B.JPG')]
    assert list_images(str(tmp_path), recursive=False) == [str(tmp_path / 'A.png')]


def test_model_without_config(tmp_path):
    with pytest.raises(ValueError, match='has no config'):
        extract_features(torch.nn.Linear(2, 2), list_images(SOP)[:1], progress=False)
