"""tools/deployment/export.py on tiny random-weight versions of each family we ship, checked
numerically by the tool itself (onnxruntime / torch.jit against PyTorch) and here again."""
import json
import os
import os.path as osp
import re

import numpy as np
import pytest
import torch

from irtbox.apis import init_model
from irtbox.deployment import EmbeddingExport, export_model
from irtbox.utils.config import load_config
from irtbox.cli import export as export_tool
from tests.conftest import narrow_hybrid_embed

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
QUICKSTART = 'configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py'
FAMILIES = {
    # IRT: DeiT-S recipe (bgr_to_rgb), one block.
    'irt-deit': ('configs/irt/irt-r_deit-s_1xb64-35k_sop.py', [
        'model.backbone.pretrained=False', 'model.backbone.depth=1',
        'model.backbone.embed_dim=64', 'model.backbone.num_heads=2',
        'model.head.losses.contrastive.embed_dim=64'], (224, 224)),
    # DToP: the hybrid R50 stem (narrowed: narrow_stem) + ViT with dynamic position embedding,
    # the DToP neck, 3 test scales and learned whitening.
    'dtop': ('configs/dtop/dtop_r50-vit-b_8xb8-30e_sfm120k.py', [
        'model.backbone.pretrained=False', 'model.backbone.depth=2',
        'model.backbone.embed_dim=64', 'model.backbone.num_heads=2',
        'model.backbone.out_indices=[-2,-1]', 'model.neck.0.in_channels=64',
        'model.backbone.img_size=64', 'model.whitening.in_dim=128',
        'model.head.losses.arcface.embed_dim=128'], (64, 64)),
    # GeM ResNet-50 (landmarks, IRT Table 6 baseline).
    'gem-resnet': ('configs/irt/landmarks/irt-l_r50-gem_1xb5-100e_sfm120k.py', [
        'model.backbone.pretrained=False'], (96, 96)),
    # The recipe benchmark's DINOv2 ViT-B/14, one block, 28 x 28.
    'dinov2': ('configs/dml_benchmark/dml_dinov2-vit-b_arcface_1xb256-39k_cub.py', [
        'model.backbone.pretrained=False', 'model.backbone.depth=1',
        'model.backbone.img_size=28', 'model.backbone.init_values=1.0'], (28, 28)),
}


@pytest.fixture
def narrow_stem(monkeypatch):
    """The hybrid's ResNet stem narrowed (tests/conftest.py narrow_hybrid_embed): the same
    stages, blocks and operators (weight-standardised 'same' convolutions, GroupNorm) at a
    fraction of the R50's 12M parameters and work. In this process, so the tool's own model
    is narrowed too."""
    import functools

    import timm
    create = timm.create_model

    def narrowed(name, *args, **kwargs):
        if name == 'vit_base_r50_s16_384':
            kwargs.setdefault('embed_layer', functools.partial(narrow_hybrid_embed, (3, 4, 9)))
        return create(name, *args, **kwargs)
    monkeypatch.setattr(timm, 'create_model', narrowed)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    monkeypatch.setenv('IRTBOX_OFFLINE', '1')


def checkpoint_of(config, opts, path):
    """A random-weight checkpoint of the reduced model, its whitening (if any) fitted."""
    cfg_options = export_tool.parse_args(
        [config, 'none', '--format', 'onnx', '--out', 'x', '--cfg-options', *opts]).cfg_options \
        if opts else None
    torch.manual_seed(0)
    model = init_model(osp.join(ROOT, config), cfg_options=cfg_options)
    if model.whitening is not None:
        dim = model.whitening.mean.shape[0]
        q, _ = torch.linalg.qr(torch.randn(dim, dim))
        out_dim = model.whitening.projection.shape[0]
        model.whitening.set_projection(0.01 * torch.randn(dim), q[:out_dim])
    torch.save({'state_dict': model.state_dict()}, path)
    return model, cfg_options


@pytest.mark.slow
@pytest.mark.parametrize('fmt', ['onnx', 'torchscript'])
@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_families_export_and_match(family, fmt, tmp_path, narrow_stem):
    config, opts, size = FAMILIES[family]
    ckpt = str(tmp_path / 'model.pth')
    model, _ = checkpoint_of(config, opts, ckpt)
    out = str(tmp_path / f'model.{"onnx" if fmt == "onnx" else "pt"}')
    argv = [osp.join(ROOT, config), ckpt, '--format', fmt, '--out', out, '--dynamic-batch',
            '--input-size', str(size[0]), str(size[1]), '--batch-size', '3',
            '--cfg-options', *opts]
    if family in ('dtop', 'gem-resnet'):  # dynamic position embedding; a CNN
        argv += ['--dynamic-size']
    report = export_tool.main(argv)
    assert osp.isfile(out) and [c['case'] for c in report['checks']][:2] == [
        f'batch 3 at {size[0]}x{size[1]}', 'batch 2']
    with open(out + '.json') as f:
        assert json.load(f)['output']['dim'] == report['output']['dim']
    # Independently of the tool: the file on 5 fresh images equals the eager model.
    generator = torch.Generator().manual_seed(7)
    sizes = [size] + ([(size[0] + 16, size[1] - 8)] if '--dynamic-size' in argv else [])
    if fmt == 'onnx':
        import onnxruntime
        session = onnxruntime.InferenceSession(out, providers=['CPUExecutionProvider'])
    else:
        loaded = torch.jit.load(out)
    for h, w in sizes:
        images = torch.randint(0, 256, (5, 3, h, w), dtype=torch.uint8, generator=generator)
        with torch.no_grad():
            expected = EmbeddingExport(model)(images).numpy()
        if fmt == 'onnx':
            got = session.run(None, {'images': images.numpy()})[0]
        else:
            with torch.no_grad():
                got = loaded(images).numpy()
        assert got.shape == expected.shape == (5, report['output']['dim'])
        np.testing.assert_allclose(got, expected, atol=1e-4)
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


@pytest.mark.slow
def test_the_graph_normalises_like_the_pipeline(tmp_path):
    """RGB uint8 in: the same embedding as the test pipeline's BGR image through the model's
    own data preprocessor, for a BGR-trained and an RGB-trained model."""
    for config, bgr in ((QUICKSTART, True), (FAMILIES['irt-deit'][0], False)):
        opts = [] if config == QUICKSTART else FAMILIES['irt-deit'][1]
        model, _ = checkpoint_of(config, opts, str(tmp_path / 'm.pth'))
        assert model.input_spec.network_order == ('bgr' if bgr else 'rgb')
        rgb = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
        if config != QUICKSTART:
            rgb = torch.randint(0, 256, (2, 3, 224, 224), dtype=torch.uint8)
        bgr_batch = {'inputs': list(rgb.flip(1)), 'data_samples': None}
        with torch.no_grad():
            inputs = model.data_preprocessor(bgr_batch, False)['inputs']
            np.testing.assert_allclose(EmbeddingExport(model)(rgb).numpy(),
                                       model(inputs, mode='tensor').numpy(), atol=1e-5)


@pytest.mark.slow
def test_dynamo_exporter(tmp_path):
    """The torch.export-based ONNX exporter, dynamic batch, on the quick-start ViT."""
    pytest.importorskip('onnxscript', reason='the dynamo exporter needs onnxscript')
    out = str(tmp_path / 'q.onnx')
    report = export_tool.main([osp.join(ROOT, QUICKSTART), 'none', '--format', 'onnx', '--out',
                               out, '--dynamic-batch', '--dynamo'])
    assert report['exporter'] == 'dynamo' and osp.isfile(out)
    assert [c['case'] for c in report['checks']] == ['batch 4 at 32x32', 'batch 3']


def test_fixed_size_model_with_dynamic_size_fails_clearly(tmp_path):
    """A plain ViT (timm position embedding, fixed 32 x 32): a second size cannot work, the
    tool says so before exporting and no file is left."""
    out = str(tmp_path / 'q.onnx')
    with pytest.raises(SystemExit, match='--dynamic-size: .*does not accept the check.s size '
                                         '64x48.*fixed input size: export it at that size'):
        export_tool.main([osp.join(ROOT, QUICKSTART), 'none', '--format', 'onnx', '--out', out,
                          '--dynamic-size'])
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_wrong_export_is_caught(tmp_path, monkeypatch):
    """An exported graph that differs from PyTorch (simulated) fails the export."""
    import irtbox.deployment.export as export_module
    real = export_module.run_exported
    monkeypatch.setattr(export_module, 'run_exported',
                        lambda path, fmt, images: real(path, fmt, images) + 1e-3)
    model = init_model(osp.join(ROOT, QUICKSTART))
    out = str(tmp_path / 'q.pt')
    with pytest.raises(export_module.ExportCheckError, match='max \\|diff\\| 1.00e-03'):
        export_model(model, 'torchscript', out, log=lambda *_: None)
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_default_input_size_and_float_input(tmp_path):
    model = init_model(osp.join(ROOT, QUICKSTART))
    report = export_model(model, 'onnx', str(tmp_path / 'q.onnx'), input_dtype='float32',
                          log=lambda *_: None)
    assert (report['input']['height'], report['input']['width']) == (32, 32)
    assert report['input']['dtype'] == 'float32'
    assert load_config(osp.join(ROOT, QUICKSTART)).model.backbone.img_size == 32


@pytest.mark.slow
def test_readme_onnxruntime_recipe_equals_extract_features(tmp_path):
    """tools/deployment/README.md's serving snippet (OpenCV resize, BGR -> RGB, uint8 NCHW,
    onnxruntime) gives the embeddings extract_features gives through the test pipeline."""
    import cv2
    import onnxruntime

    from irtbox.apis import extract_features
    model = init_model(osp.join(ROOT, QUICKSTART))
    out = str(tmp_path / 'q.onnx')
    export_model(model, 'onnx', out, log=lambda *_: None)  # the default: any batch size
    rng = np.random.default_rng(0)
    paths = []
    for i, shape in enumerate([(8, 8), (40, 24), (64, 64)]):
        paths.append(str(tmp_path / f'{i}.png'))
        cv2.imwrite(paths[-1], rng.integers(0, 256, (*shape, 3), dtype=np.uint8))
    session = onnxruntime.InferenceSession(out, providers=['CPUExecutionProvider'])
    images = [cv2.resize(cv2.imread(p, cv2.IMREAD_COLOR), (32, 32))[..., ::-1] for p in paths]
    batch = np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2))
    got = session.run(['embeddings'], {'images': batch})[0]
    expected = extract_features(model, paths, progress=False).embeddings
    np.testing.assert_allclose(got, expected, atol=1e-4)
    # The recipe's query: one image at a time.
    np.testing.assert_allclose(session.run(['embeddings'], {'images': batch[:1]})[0],
                               expected[:1], atol=1e-4)


@pytest.mark.slow
def test_short_edge_pipeline(tmp_path):
    """A test pipeline that resizes by the short edge (a CNN): exported at the size it gives a
    square image, the report says how other shapes are resized, and the file embeds such a
    shape as extract_features does."""
    import cv2

    from irtbox.apis import extract_features
    cfg = load_config(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'))
    cfg.test_dataloader.dataset.pipeline[1] = dict(type='Resize', scale=(1000, 32),
                                                   keep_ratio=True)
    cfg.model.backbone = dict(type='TimmBackbone', model_name='resnet18', pretrained=False)
    cfg.model.neck, cfg.model.head = [dict(type='GeMPool')], None
    torch.manual_seed(0)
    model = init_model(cfg)
    out = str(tmp_path / 'short.onnx')
    report = export_model(model, 'onnx', out, dynamic_batch=True, dynamic_size=True,
                          log=lambda *_: None)
    assert (report['input']['height'], report['input']['width']) == (32, 32)
    with open(out + '.json') as f:
        spec = json.load(f)['input_spec']
    assert (spec['size'], spec['size_varies'], spec['network_order']) == ([32, 32], 'aspect',
                                                                          'rgb')
    # One channel order for the file's input: RGB (irtbox's loader's BGR is not in it).
    assert 'pixel_order' not in spec and report['input']['channels'] == 'RGB'
    assert report['input']['flipped_to_network_order_inside'] is False
    path = str(tmp_path / 'wide.png')
    cv2.imwrite(path, np.random.default_rng(0).integers(0, 256, (48, 96, 3), dtype=np.uint8))
    rgb = cv2.resize(cv2.imread(path), (64, 32))[..., ::-1]  # the short edge to 32
    import onnxruntime
    session = onnxruntime.InferenceSession(out, providers=['CPUExecutionProvider'])
    got = session.run(None, {'images': np.ascontiguousarray(rgb.transpose(2, 0, 1))[None]})[0]
    np.testing.assert_allclose(got, extract_features(model, [path], progress=False).embeddings,
                               atol=1e-4)


def quickstart_export(tmp_path, *args):
    return export_tool.main([osp.join(ROOT, QUICKSTART), 'none', '--format', 'onnx', '--out',
                             str(tmp_path / 'q.onnx'), *args])


@pytest.mark.slow
@pytest.mark.parametrize('args, message', [
    (['--input-size', '33', '33'], r'^export: --input-size 33x33: the PyTorch '
     r"model does not accept it \(AssertionError: Input height \(33\) doesn't match model "
     r'\(32\)\.\); its position embedding fixes the input at 32x32 \(patch size 4x4\): give '
     r'32 32 or leave the size out$'),
    (['--opset', '9'], r'^export: --opset 9: the model uses aten::flip, which ONNX opset 9 '
     r'cannot express; it needs opset 10 or higher \(the default is 17\)$'),
    (['--opset', '99'], r'^export: --opset 99: the installed torch \S+ tracing ONNX exporter '
     r'writes opsets 7 to \d+ \(default 17\)$'),
])
def test_bad_size_or_opset_is_one_line(args, message, tmp_path, capfd):
    """A size the model does not take and an opset the exporter or the model cannot use: one
    line naming the argument, before or instead of the exporter's traceback and graph dump;
    nothing is written."""
    with pytest.raises(SystemExit) as info:
        quickstart_export(tmp_path, *args)
    assert re.match(message, str(info.value.code)), info.value.code
    assert 'Torch IR graph' not in capfd.readouterr().out
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('args, message', [
    (['--input-size', '0', '0'], 'argument --input-size: height and width must be positive, '
     'got 0 0'),
    (['--batch-size', '1'], 'argument --batch-size: the dynamic batch axis is checked at two '
     'batch sizes'),
    (['--fixed-batch', '0'], 'argument --fixed-batch: expected a positive number of images'),
    (['--fixed-batch', '2', '--batch-size', '3'], '--batch-size 3 with --fixed-batch 2'),
    (['--fixed-batch', '2', '--dynamic-batch'], 'not allowed with argument --fixed-batch'),
])
def test_bad_batch_or_size_argument(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        export_tool.parse_args([QUICKSTART, 'none', '--format', 'onnx', '--out', 'x', *args])
    assert message in capsys.readouterr().err


def test_export_model_checks_its_arguments(tmp_path):
    model = init_model(osp.join(ROOT, QUICKSTART))
    with pytest.raises(ValueError, match=r'input_size must be a positive '
                                         'height and width, got 0 x 32'):
        export_model(model, 'onnx', str(tmp_path / 'q.onnx'), input_size=(0, 32))
    with pytest.raises(ValueError, match='dynamic_batch=False for a file that takes exactly one'):
        export_model(model, 'onnx', str(tmp_path / 'q.onnx'), batch_size=1)
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_default_export_takes_any_batch_and_says_so(tmp_path):
    """The default file takes any batch size (one image included) and its .json says
    "batch": "dynamic"; --fixed-batch N pins N and the .json says N; --dynamic-batch is
    still accepted (the default)."""
    import onnxruntime
    out = str(tmp_path / 'q.onnx')
    images = torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8).numpy()
    for args, batch, sizes in (([], 'dynamic', (1, 6)), (['--dynamic-batch'], 'dynamic', (1,)),
                               (['--fixed-batch', '2'], 2, (2,))):
        report = quickstart_export(tmp_path, *args)
        with open(out + '.json') as f:
            assert json.load(f)['input']['batch'] == report['input']['batch'] == batch
        session = onnxruntime.InferenceSession(out, providers=['CPUExecutionProvider'])
        for n in sizes:
            assert session.run(None, {'images': images[:n]})[0].shape == (n, 192)
    assert [c['case'] for c in report['checks']] == ['batch 2 at 32x32']


@pytest.mark.slow
def test_killed_export_leaves_a_recognisable_temporary_that_the_next_removes(tmp_path):
    """SIGKILL during the check: no file under --out, only atomic_write's hidden temporary
    (.q.onnx.<random>.tmp.onnx); the next export to that path removes it, not another
    file's temporary, and writes the file."""
    import subprocess
    import sys
    code = f"""
import os, signal, sys
import irtbox.deployment.export as e
e.run_exported = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
from irtbox.cli import export
export.main([{osp.join(ROOT, QUICKSTART)!r}, 'none', '--format', 'onnx', '--out',
             {str(tmp_path / 'q.onnx')!r}])
"""
    result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env=dict(os.environ, HF_HUB_OFFLINE='1'))
    assert result.returncode == -9, result.stderr[-2000:]
    left = os.listdir(tmp_path)
    assert len(left) == 1 and re.fullmatch(r'\.q\.onnx\.[a-z0-9_]{8}\.tmp\.onnx', left[0]), left
    (tmp_path / '.other.onnx.abcd1234.tmp.onnx').write_bytes(b'not ours')
    logged = []
    export_model(init_model(osp.join(ROOT, QUICKSTART)), 'onnx', str(tmp_path / 'q.onnx'),
                 log=logged.append)
    assert sorted(os.listdir(tmp_path)) == ['.other.onnx.abcd1234.tmp.onnx', 'q.onnx',
                                            'q.onnx.json']
    assert sum('did not finish' in line for line in logged) == 1


def test_a_gpu_model_is_exported_from_the_cpu(tmp_path):
    """A model on the GPU (its tensors DeviceTensors here, which report is_cuda) used to
    meet the CPU check images in its first forward, and the device error read "input size
    ... the PyTorch model does not accept it". The export runs on a CPU copy; the caller's
    model stays where it was."""
    from tests.gpu_semantics import DeviceTensor, as_gpu_model
    model = init_model(osp.join(ROOT, QUICKSTART))
    as_gpu_model(model)
    forward = type(model).forward

    def on_one_device(self, *args, **kwargs):
        assert not any(isinstance(p, DeviceTensor) for p in self.parameters()), \
            'a GPU model met CPU images'
        return forward(self, *args, **kwargs)

    type(model).forward = on_one_device
    # Module.cpu() then gives new parameters, as a real move does (here the simulated GPU
    # tensors would otherwise keep their class with CPU data).
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        report = export_model(model, 'onnx', str(tmp_path / 'q.onnx'))
    finally:
        type(model).forward = forward
        torch.__future__.set_overwrite_module_params_on_conversion(False)
    assert report['checks'] and osp.isfile(tmp_path / 'q.onnx')
    assert all(isinstance(p, DeviceTensor) for p in model.parameters())


@pytest.mark.slow
def test_an_unfitted_projection_is_named_not_the_input_size(tmp_path):
    # Before: "--input-size 32x32: the PyTorch model does not accept it".
    from irtbox.apis import init_model
    tiny = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
    model = init_model(tiny, cfg_options={'model.neck': [
        dict(type='ClsTokenPool'), dict(type='PCAReduction', in_dim=32, out_dim=8)]})
    with pytest.raises(ValueError, match=r'^neck\.1 \(PCAReduction\): not fitted'):
        export_model(model, 'onnx', str(tmp_path / 'm.onnx'))
    assert os.listdir(tmp_path) == []


def test_a_gpu_model_is_copied_onto_the_cpu_not_on_the_gpu(tmp_path, monkeypatch):
    """Issue 47 item 9: the CPU copy of a GPU model was a deep copy on the GPU, then moved:
    the model's size once more on a GPU that may hold little more than it. Here a copy of a
    simulated GPU tensor fails; the copy's tensors are made on the CPU, one at a time."""
    from tests.gpu_semantics import DeviceTensor, as_gpu_model
    from irtbox.deployment.export import _cpu_copy as cpu_copy

    def on_the_gpu(self, memo):
        raise AssertionError('a GPU tensor deep-copied on the GPU')
    model = as_gpu_model(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)))
    model[1].weight.requires_grad_(False)
    monkeypatch.setattr(DeviceTensor, '__deepcopy__', on_the_gpu, raising=False)
    copy = cpu_copy(model)
    assert not any(isinstance(t, DeviceTensor) for t in [*copy.parameters(), *copy.buffers()])
    for mine, theirs in zip([*copy.parameters(), *copy.buffers()],
                            [*model.parameters(), *model.buffers()]):
        assert torch.equal(mine, theirs.cpu()) and mine.requires_grad == theirs.requires_grad
    assert isinstance(copy[0].weight, torch.nn.Parameter)
