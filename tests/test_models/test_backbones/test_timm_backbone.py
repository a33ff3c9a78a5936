import functools
import http.server
import threading

import pytest
import torch

from irtbox.models.backbones import TimmBackbone


def tiny_vit(**kwargs):
    return TimmBackbone('vit_tiny_patch16_224', img_size=32, patch_size=8, depth=2, **kwargs)


def test_vit_last_layer_matches_forward_features():
    torch.manual_seed(0)
    backbone = tiny_vit().eval()
    x = torch.randn(2, 3, 32, 32)
    (prefix, grid), = backbone(x)
    tokens = backbone.model.forward_features(x)
    assert prefix.shape == (2, 1, 192) and grid.shape == (2, 192, 4, 4)
    torch.testing.assert_close(prefix[:, 0], tokens[:, 0])
    torch.testing.assert_close(grid.flatten(2).transpose(1, 2), tokens[:, 1:])


def test_vit_several_layers_and_distillation_token():
    backbone = TimmBackbone('deit_tiny_distilled_patch16_224', img_size=32, patch_size=8,
                            depth=3, out_indices=(0, -1)).eval()
    outs = backbone(torch.randn(1, 3, 32, 32))
    assert backbone.out_indices == (0, 2)
    assert [tuple(p.shape) for p, _ in outs] == [(1, 2, 192), (1, 2, 192)]


def test_cnn_returns_maps():
    backbone = TimmBackbone('resnet18').eval()
    (feat,) = backbone(torch.randn(1, 3, 64, 64))
    assert feat.shape == (1, 512, 2, 2)


def test_bad_arguments():
    with pytest.raises(ValueError, match='unknown timm model_name'):
        TimmBackbone('no_such_model')
    with pytest.raises(ValueError, match='out of range'):
        tiny_vit(out_indices=5)


def test_checkpoint_from_file_with_prefix(tmp_path):
    torch.manual_seed(1)
    src = tiny_vit()
    path = tmp_path / 'w.pth'
    torch.save({'state_dict': {f'module.{k}': v for k, v in src.model.state_dict().items()}}, path)
    dst = tiny_vit(checkpoint=str(path))
    for key, value in src.model.state_dict().items():
        torch.testing.assert_close(dst.model.state_dict()[key], value)


def test_checkpoint_for_another_model_is_refused(tmp_path):
    path = tmp_path / 'resnet.pth'
    torch.save(TimmBackbone('resnet18').model.state_dict(), path)
    with pytest.raises(ValueError, match='no weight'):
        tiny_vit(checkpoint=str(path))


def test_checkpoint_from_url(tmp_path, monkeypatch):
    """Downloads from a local HTTP server into the hub cache, hash-checked by file name."""
    import hashlib
    torch.manual_seed(2)
    src = tiny_vit()
    served = tmp_path / 'served'
    served.mkdir()
    tmp = served / 'tmp.pth'
    torch.save(src.model.state_dict(), tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()[:8]
    tmp.rename(served / f'vit-{digest}.pth')
    (served / 'bad-00000000.pth').write_bytes((served / f'vit-{digest}.pth').read_bytes())
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'hub'))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f'http://127.0.0.1:{server.server_port}'
        dst = tiny_vit(checkpoint=f'{url}/vit-{digest}.pth')
        torch.testing.assert_close(dst.model.state_dict()['cls_token'], src.model.state_dict()['cls_token'])
        with pytest.raises(RuntimeError, match='hash'):
            tiny_vit(checkpoint=f'{url}/bad-00000000.pth')
    finally:
        server.shutdown()
