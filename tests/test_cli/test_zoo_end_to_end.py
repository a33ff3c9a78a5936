"""A zoo end to end, as the quick start does it: train the digits IRT_R model, publish it with
tools/misc/publish_model.py, serve the zoo folder over HTTP on 127.0.0.1, fetch it with
get_model(pretrained=True) through the folder's index, and get the checkpoint's embeddings;
then offline from the cache, and a damaged cache fetched again."""
import functools
import os
import os.path as osp
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from mmengine.dataset import pseudo_collate

from irtbox.apis import get_model, init_model
from irtbox.datasets import FolderDataset
from irtbox.utils.config import load_config
from irtbox.utils.download import OfflineError
from irtbox.cli import train as train_tool
from irtbox.cli import publish_model

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')

pytest.importorskip('sklearn.datasets')


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def zoo_server(tmp_path):
    folder = tmp_path / 'zoo'
    folder.mkdir()
    server = ThreadingHTTPServer(('127.0.0.1', 0),
                                 functools.partial(QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield str(folder), f'http://127.0.0.1:{server.server_address[1]}/'
    server.shutdown()
    server.server_close()


def digit_embeddings(model, data_root):
    """Embeddings of 8 test digits, loaded by the config's own test pipeline."""
    pipeline = load_config(CONFIG).test_dataloader.dataset.pipeline
    dataset = FolderDataset(data_root=data_root, split='test', pipeline=pipeline)
    batch = model.data_preprocessor(pseudo_collate([dataset[i] for i in range(0, 400, 50)]), False)
    with torch.no_grad():
        return model(batch['inputs'], mode='tensor')


@pytest.mark.slow
def test_quickstart_model_through_a_served_zoo(zoo_server, tmp_path, monkeypatch, digits_root):
    folder, url = zoo_server
    data_root = str(digits_root)  # the session's digits (prepare_digits), read only
    work_dir = str(tmp_path / 'train')
    monkeypatch.chdir(ROOT)
    train_tool.main([CONFIG, '--work-dir', work_dir, '--cfg-options',
                     *[f'{loader}.dataset.data_root={data_root}' for loader in
                       ('train_dataloader', 'val_dataloader', 'test_dataloader')],
                     'train_cfg.max_iters=3', 'train_cfg.val_interval=100',
                     'train_cfg.val_begin=100',  # no validation (not even after the last iteration)
                     'default_hooks.checkpoint.interval=3'])
    checkpoint = osp.join(work_dir, 'iter_3.pth')
    info = publish_model.main([checkpoint, folder, '--config', CONFIG, '--name', 'digits-irt-r',
                               '--url-prefix', url])
    monkeypatch.setenv('IRTBOX_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('IRTBOX_MODEL_INDEX', info['index'])

    expected = digit_embeddings(init_model(CONFIG, checkpoint), data_root)
    fetched = get_model('digits-irt-r')
    cached = osp.join(str(tmp_path / 'home'), 'checkpoints', osp.basename(info['path']))
    assert osp.isfile(cached)
    assert torch.equal(digit_embeddings(fetched, data_root), expected)

    monkeypatch.setenv('IRTBOX_OFFLINE', '1')
    assert torch.equal(digit_embeddings(get_model('digits-irt-r'), data_root), expected)

    with open(cached, 'r+b') as f:  # one flipped byte: same size, wrong hash
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(OfflineError, match=info['url'].replace('.', r'\.')):
        get_model('digits-irt-r')
    monkeypatch.delenv('IRTBOX_OFFLINE')
    assert torch.equal(digit_embeddings(get_model('digits-irt-r'), data_root), expected)
    assert os.listdir(folder)  # the served folder is untouched by the fetches
