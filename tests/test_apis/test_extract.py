"""extract_features: the test pipeline exactly as tools/test.py applies it, files and arrays
alike, unreadable files skipped and listed, the result an EmbeddingSet with the model's
identity, non-finite embeddings refused."""
import copy
import logging
import os
import os.path as osp
import shutil

import cv2
import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

import irtbox.apis.extract as extract_module
from irtbox.apis import NonFiniteEmbeddingsError, extract_features, init_model, list_images
from irtbox.apis.identity import model_identity
from irtbox.structures import EmbeddingSet
from irtbox.utils.config import load_config

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')  # bgr_to_rgb=True
SOP = osp.join(ROOT, 'tests', 'data', 'sop')


@pytest.fixture(scope='module')
def model():
    torch.manual_seed(0)
    return init_model(TINY)


@pytest.fixture
def photos(tmp_path):
    """Two class folders of SOP photos plus a grayscale and an RGBA PNG."""
    folder = tmp_path / 'photos'
    for name in ('chair_final', 'cabinet_final'):
        shutil.copytree(osp.join(SOP, name), folder / name)
    rgb = cv2.imread(list_images(SOP)[0])
    cv2.imwrite(str(folder / 'chair_final' / 'gray.png'), cv2.cvtColor(rgb, cv2.COLOR_BGR2GRAY))
    cv2.imwrite(str(folder / 'chair_final' / 'rgba.png'), cv2.cvtColor(rgb, cv2.COLOR_BGR2BGRA))
    return str(folder)


@pytest.fixture
def warnings_logged(monkeypatch):
    logged = []
    monkeypatch.setattr(extract_module, 'print_log',
                        lambda msg, logger=None, level=logging.INFO: logged.append((level, msg)))
    return logged


@pytest.mark.slow
def test_equals_the_test_dataloader(model, photos):
    """The config's test dataloader (as tools/test.py builds it) over a FolderDataset."""
    loader_cfg = copy.deepcopy(model.cfg.test_dataloader)
    loader_cfg.dataset = dict(type='FolderDataset', data_root=photos, split=None,
                              pipeline=model.cfg.test_dataloader.dataset.pipeline)
    with DefaultScope.overwrite_default_scope('irtbox'):
        loader = Runner.build_dataloader(loader_cfg)
    expected, paths = [], []
    with torch.no_grad():
        for batch in loader:
            expected.append(model(model.data_preprocessor(batch, False)['inputs'],
                                  mode='tensor').numpy())
            paths += [s.img_path for s in batch['data_samples']]
    result = extract_features(model, photos, batch_size=3, progress=False, device='cpu')
    assert isinstance(result, EmbeddingSet)
    assert result.ids == paths and len(paths) == 16 and not result.failed
    np.testing.assert_allclose(result.embeddings, np.concatenate(expected), atol=1e-6)
    assert result.embeddings.dtype == np.float32
    assert result.identity == model_identity(model)
    assert extract_features(model, paths[:1], progress=False, identity=False).identity is None


def test_rgb_arrays_equal_files(model):
    paths = list_images(SOP)[:4]
    arrays = [cv2.cvtColor(cv2.imread(p), cv2.COLOR_BGR2RGB) for p in paths]
    from_files = extract_features(model, paths, progress=False)
    from_arrays = extract_features(model, arrays, progress=False)
    assert from_arrays.ids == [f'array:{i}' for i in range(4)]
    np.testing.assert_allclose(from_arrays.embeddings, from_files.embeddings, atol=1e-6)
    bgr = extract_features(model, [a[..., ::-1].copy() for a in arrays], progress=False)
    assert not np.allclose(bgr.embeddings, from_files.embeddings)  # the order matters
    one = extract_features(model, arrays[0], progress=False)  # a single array
    np.testing.assert_allclose(one.embeddings, from_files.embeddings[:1], atol=1e-6)


def test_bad_arrays_are_refused(model):
    image = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match=r'images\[1\]: expected a path or an H x W x 3 uint8'):
        extract_features(model, [image, image.astype(np.float32)], progress=False)


@pytest.mark.slow
def test_unreadable_files_are_listed(model, tmp_path, warnings_logged):
    folder = tmp_path / 'photos'
    folder.mkdir()
    good = list_images(SOP)[:3]
    for i, path in enumerate(good):
        shutil.copy(path, folder / f'{i}.jpg')
    with open(good[0], 'rb') as f:
        data = f.read()
    (folder / 'cut.jpg').write_bytes(data[:len(data) * 2 // 3])
    png = cv2.imencode('.png', cv2.imread(good[0]))[1].tobytes()
    (folder / 'cut.png').write_bytes(png[:len(png) // 2])
    (folder / 'empty.jpg').write_bytes(b'')
    (folder / 'text.JPG').write_text('hello')
    (folder / 'readme.txt').write_text('not listed: not an image extension')
    result = extract_features(model, str(folder), progress=False, num_workers=2)
    failed = {osp.basename(path) for path, _ in result.failed}
    assert failed == {'cut.jpg', 'cut.png', 'empty.jpg', 'text.JPG'}
    assert all(reason for _, reason in result.failed)
    assert [osp.basename(i) for i in result.ids] == ['0.jpg', '1.jpg', '2.jpg']
    assert result.embeddings.shape == (3, 32)
    [(level, message)] = warnings_logged
    assert level == logging.WARNING and '4 of 7 images could not be read' in message
    assert all(name in message for name in failed)


def test_crop_bbox_is_a_no_op_without_a_box(model):
    """Landmark test pipelines crop query boxes; plain images have none."""
    paths = list_images(SOP)[:2]
    cfg = copy.deepcopy(model.cfg)
    cfg.test_dataloader.dataset.pipeline.insert(1, dict(type='CropBBox'))
    cropping = init_model(cfg)
    cropping.load_state_dict(model.state_dict())
    types = [t['type'] for t in cropping.input_spec.pipeline]
    assert types[:2] == ['LoadImageFromFile', 'CropBBox']
    np.testing.assert_array_equal(extract_features(cropping, paths, progress=False).embeddings,
                                  extract_features(model, paths, progress=False).embeddings)


@pytest.mark.slow
@pytest.mark.parametrize('resize, varies', [
    (dict(type='Resize', scale=(1000, 24), keep_ratio=True), 'aspect'),  # short edge 24
    (dict(type='Resize', scale_factor=0.5), 'image'),
])
def test_pipelines_without_a_fixed_size(resize, varies, tmp_path):
    """A test pipeline that resizes by the short edge or by a scale factor: images of other
    shapes reach the network at other sizes, each embedded unpadded, as the test dataloader
    does one at a time, whatever the batch holds."""
    cfg = load_config(TINY)
    cfg.test_dataloader.dataset.pipeline[1] = resize
    cfg.model.backbone.update(dynamic_img_size=True, dynamic_img_pad=True)
    torch.manual_seed(0)
    model = init_model(cfg)
    assert model.input_spec.size_varies == varies
    rng = np.random.default_rng(0)
    paths = []
    for i, shape in enumerate([(40, 24), (32, 32), (24, 40), (40, 24), (30, 60)]):
        paths.append(str(tmp_path / f'class_{i % 2}' / f'{i}.png'))
        os.makedirs(osp.dirname(paths[-1]), exist_ok=True)
        cv2.imwrite(paths[-1], rng.integers(0, 256, (*shape, 3), dtype=np.uint8))
    loader_cfg = dict(batch_size=1, num_workers=0, sampler=dict(type='DefaultSampler',
                                                                shuffle=False),
                      dataset=dict(type='FolderDataset', data_root=str(tmp_path), split=None,
                                   pipeline=cfg.test_dataloader.dataset.pipeline))
    with DefaultScope.overwrite_default_scope('irtbox'):
        loader = Runner.build_dataloader(loader_cfg)
    expected, shapes = {}, set()
    with torch.no_grad():
        for batch in loader:
            inputs = model.data_preprocessor(batch, False)['inputs']
            shapes.add(tuple(inputs.shape[-2:]))
            expected[batch['data_samples'][0].img_path] = model(inputs, mode='tensor').numpy()
    assert len(shapes) == 4  # the sizes differ: the batches below mix them
    result = extract_features(model, paths, batch_size=3, progress=False)
    np.testing.assert_allclose(result.embeddings, np.concatenate([expected[p] for p in paths]),
                               atol=1e-6)
    arrays = [cv2.imread(p)[..., ::-1] for p in paths]
    np.testing.assert_allclose(extract_features(model, arrays, batch_size=4,
                                                progress=False).embeddings,
                               result.embeddings, atol=1e-6)


def test_list_images(tmp_path):
    with pytest.raises(FileNotFoundError, match='image folder not found'):
        list_images(str(tmp_path / 'nowhere'))
    (tmp_path / 'a.txt').write_text('x')
    with pytest.raises(ValueError, match='no images'):
        list_images(str(tmp_path))
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'B.JPG').write_bytes(b'')
    (tmp_path / 'sub' / 'c.webp').write_bytes(b'')
    (tmp_path / 'A.tiff').write_bytes(b'')
    expected = [tmp_path / 'A.tiff', tmp_path / 'sub' / 'B.JPG', tmp_path / 'sub' / 'c.webp']
    assert list_images(str(tmp_path)) == [str(p) for p in expected]
    assert list_images(str(tmp_path), recursive=False) == [str(tmp_path / 'A.tiff')]


def test_model_without_config():
    with pytest.raises(ValueError, match=r'\(Linear\) has no config'):
        extract_features(torch.nn.Linear(2, 2), list_images(SOP)[:1], progress=False)


def test_a_model_with_a_nan_weight_is_an_error_not_a_useless_result(model, tmp_path):
    """One NaN in the weights makes every embedding NaN: an error that counts the images and
    names the first few and the weight, rather than a features file of NaN."""
    broken = init_model(TINY)
    broken.load_state_dict(model.state_dict())
    name, weight = next((n, p) for n, p in broken.named_parameters() if p.dim() == 2)
    with torch.no_grad():
        weight[0, 0] = float('nan')
    paths = list_images(SOP)[:7]
    with pytest.raises(NonFiniteEmbeddingsError) as info:
        extract_features(broken, paths, batch_size=3, progress=False)
    message = str(info.value)
    assert '7 of 7 images gave non-finite (NaN or inf) embeddings' in message
    assert all(p in message for p in paths[:5]) and paths[5] not in message
    assert 'and 2 more' in message and name in message
    assert isinstance(info.value, ValueError)
    assert extract_features(model, paths, progress=False).embeddings.shape == (7, 32)


@pytest.mark.parametrize('on_gpu', [False, True])
def test_batches_are_page_locked_for_a_gpu_model(monkeypatch, on_gpu):
    """Pinned batches copy to the GPU asynchronously; on the CPU pinning is pointless."""
    from tests.gpu_semantics import as_gpu_model
    model = init_model(TINY)
    if on_gpu:
        as_gpu_model(model)
    seen = []

    class Built(Exception):
        pass

    def recording(*args, **kwargs):
        seen.append(kwargs.get('pin_memory', False))
        raise Built  # the loader's arguments are what is checked here

    monkeypatch.setattr(extract_module.torch.utils.data, 'DataLoader', recording)
    with pytest.raises(Built):
        extract_features(model, [np.zeros((8, 8, 3), np.uint8)], progress=False, identity=False)
    assert seen == [on_gpu]


def test_extraction_runs_as_the_config_tests_in_bf16_or_not(monkeypatch, model):
    """Issue 47 item 10: ``init_model`` gives the model the config's ``bf16_inference`` (bf16
    autocast on a GPU with native bf16 where the config trains so, or says
    ``test_autocast=True``); on a CPU the embeddings stay those of float32, bit for bit."""
    from irtbox.engine.optim_wrappers import bf16_autocast
    assert model.bf16_inference is False  # no GPU here
    monkeypatch.setattr(bf16_autocast, 'bf16_autocast_available', lambda: True)
    assert init_model(TINY).bf16_inference is False  # tiny_irt trains in float32
    forced = init_model(TINY, cfg_options=dict(test_autocast=True))
    assert forced.bf16_inference is True
    assert init_model(TINY, cfg_options=dict(
        optim_wrapper=dict(type='BF16AutocastOptimWrapper'))).bf16_inference is True
    forced.load_state_dict(model.state_dict())
    paths = list_images(SOP)[:3]
    a = extract_features(model, paths, progress=False, identity=False).embeddings
    b = extract_features(forced, paths, progress=False, identity=False).embeddings
    assert b.dtype == np.float32 and np.array_equal(a, b)
