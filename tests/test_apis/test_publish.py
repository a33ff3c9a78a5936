"""publish_checkpoint / tools/misc/publish_model.py on a real (2-iteration) training checkpoint."""
import json
import os
import os.path as osp
import re

import numpy as np
import pytest
import torch
import yaml

from irtbox.apis import get_model, init_model, publish_checkpoint
from irtbox.utils.checkpoint import safe_torch_load
from irtbox.utils.download import sha256sum
from irtbox.cli import train as train_tool
from irtbox.cli import publish_model

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """An MMEngine checkpoint of tiny_irt (cross-batch memory in its head) after 2 iterations."""
    work_dir = str(tmp_path_factory.mktemp('train'))
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        train_tool.main([TINY, '--work-dir', work_dir, '--cfg-options', 'train_cfg.max_iters=2',
                         'train_cfg.val_interval=100', 'default_hooks.checkpoint.interval=2'])
    finally:
        os.chdir(cwd)
    return osp.join(work_dir, 'iter_2.pth')


def embed(model):
    torch.manual_seed(1)
    with torch.no_grad():
        return model(torch.randn(3, 3, 32, 32), mode='tensor')


@pytest.mark.slow
def test_safetensors_release(checkpoint, tmp_path):
    from safetensors import safe_open
    zoo = str(tmp_path / 'zoo')
    info = publish_checkpoint(checkpoint, zoo, name='tiny', config=TINY)
    digest = sha256sum(info['path'])
    assert osp.basename(info['path']) == f'tiny-{digest[:8]}.safetensors'
    assert info['sha256'] == digest
    assert info['size'] == osp.getsize(info['path']) and info['embedding_dim'] == 32
    original = safe_torch_load(checkpoint)
    assert {'optimizer', 'message_hub', 'param_schedulers'} & set(original)  # what is stripped
    with safe_open(info['path'], 'pt') as f:
        keys = set(f.keys())
        assert json.loads(f.metadata()['irtbox']) == {'name': 'tiny', 'embedding_dim': 32}
    expected = {k for k in original['state_dict'] if not k.startswith('head.')}
    assert keys == expected and any(k.startswith('head.') for k in original['state_dict'])
    assert sorted(f for f in os.listdir(zoo) if not f.startswith('.')) == sorted(
        ['model-index.yml', 'tiny.py', osp.basename(info['path'])])
    with open(info['index']) as f:
        entry = yaml.safe_load(f)['Models'][0]
    assert entry['Weights'] == {'URL': osp.basename(info['path']), 'SHA256': digest,
                                'Size': info['size'], 'Embedding Dim': 32}
    # The release gives the checkpoint's embeddings, through the folder's own index and config.
    released = get_model('tiny', index=info['index'])
    assert torch.equal(embed(released), embed(init_model(TINY, checkpoint)))


@pytest.mark.slow
def test_pth_release_keeping_training_state(checkpoint, tmp_path):
    info = publish_checkpoint(checkpoint, str(tmp_path), name='tiny', config=TINY, fmt='pth',
                              keep_training_state=True)
    assert info['path'].endswith('.pth')
    saved = torch.load(info['path'], weights_only=True)
    assert set(saved) == {'state_dict', 'meta'}
    assert set(saved['state_dict']) == set(safe_torch_load(checkpoint)['state_dict'])


@pytest.mark.slow
def test_config_from_checkpoint_meta_and_republish(checkpoint, tmp_path):
    first = publish_checkpoint(checkpoint, str(tmp_path), name='tiny')
    second = publish_checkpoint(checkpoint, str(tmp_path), name='tiny', url_prefix='http://h/z/')
    assert first['sha256'] == second['sha256'] and second['url'] == 'http://h/z/' + osp.basename(
        second['path'])
    with open(second['index']) as f:
        models = yaml.safe_load(f)['Models']
    assert [m['Name'] for m in models] == ['tiny'] and models[0]['Weights']['URL'] == second['url']
    assert torch.equal(embed(get_model('tiny', pretrained=second['path'], index=second['index'])),
                       embed(init_model(TINY, checkpoint)))


@pytest.mark.slow
def test_cli_prints_the_weights_block(checkpoint, tmp_path, capsys):
    publish_model.main([checkpoint, str(tmp_path), '--config', TINY, '--name', 'tiny-cli'])
    out = capsys.readouterr().out
    match = re.search(r'URL: <URL_PREFIX>/tiny-cli-([0-9a-f]{8})\.safetensors\n'
                      r'\s+SHA256: ([0-9a-f]{64})\n\s+Size: (\d+)\n\s+Embedding Dim: 32', out)
    assert match, out
    path = tmp_path / f'tiny-cli-{match.group(1)}.safetensors'
    assert sha256sum(str(path)) == match.group(2) and path.stat().st_size == int(match.group(3))


@pytest.mark.parametrize('argv, message', [
    (['--name', 'bad name'], 'letters, digits'),
    (['--config', 'nowhere.py'], 'nowhere.py'),
])
def test_cli_bad_input(argv, message, checkpoint, tmp_path):
    with pytest.raises(SystemExit, match=message):
        publish_model.main([checkpoint, str(tmp_path)] + argv)


@pytest.mark.slow
def test_wrong_config_is_refused(checkpoint, tmp_path):
    other = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
    with pytest.raises(SystemExit, match='does not match'):
        publish_model.main([checkpoint, str(tmp_path), '--config', other])
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.safetensors')]


def test_failed_write_leaves_nothing(checkpoint, tmp_path, monkeypatch):
    import safetensors.torch

    def broken(tensors, path, metadata=None):
        with open(path, 'wb') as f:
            f.write(b'half a file')
        raise OSError('disk full')
    monkeypatch.setattr(safetensors.torch, 'save_file', broken)
    with pytest.raises(OSError, match='disk full'):
        publish_checkpoint(checkpoint, str(tmp_path), name='tiny', config=TINY)
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_tools_test_accepts_the_release(checkpoint, tmp_path, monkeypatch):
    """tools/test.py evaluates a published .safetensors file as it does the training checkpoint."""
    from irtbox.cli import test as test_tool
    info = publish_checkpoint(checkpoint, str(tmp_path / 'zoo'), name='tiny', config=TINY)
    monkeypatch.chdir(ROOT)
    runs = {}
    for run, weights in (('released', [info['path']]), ('original', [checkpoint]), ('none', [])):
        out = str(tmp_path / f'{run}.npz')
        test_tool.main([TINY, *weights, '--work-dir', str(tmp_path / run), '--out', out])
        runs[run] = np.load(out)['embeddings']
    assert np.array_equal(runs['released'], runs['original'])
    assert not np.allclose(runs['released'], runs['none'])  # the weights were really loaded


@pytest.mark.parametrize('text', ["__import__('os').system('touch {marker}')\nmodel = dict()",
                                  "model = dict(type='os.system', command='touch {marker}')"])
def test_a_checkpoint_config_is_read_as_data_not_run(tmp_path, text):
    """A checkpoint from elsewhere carries any ``meta.cfg``: publishing reads it as data."""
    from irtbox.apis.publish import checkpoint_config
    marker = tmp_path / 'ran'
    with pytest.raises(ValueError, match=r'x\.pth: meta\.cfg: .*pass the config it was trained'):
        checkpoint_config(dict(meta=dict(cfg=text.format(marker=marker))), None, 'x.pth')
    assert not marker.exists()
