"""An index folder is data: its model's config is kept as JSON and read without running code;
a Python config (an older irtbox's index, or an edited folder) is used only when named."""
import json
import os
import os.path as osp
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from irtbox.apis import init_model
from irtbox.cli import search as search_tool
from irtbox.search import ImageSearcher, UntrustedConfigError, load_index_model
from irtbox.utils.download import sha256sum

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """(index folder, checkpoint, query image) of the tiny model."""
    root = tmp_path_factory.mktemp('index_config')
    torch.manual_seed(0)
    checkpoint = str(root / 'model.pth')
    torch.save({'state_dict': init_model(TINY).state_dict()}, checkpoint)
    searcher = ImageSearcher(init_model(TINY, checkpoint))
    searcher.add(np.random.default_rng(0).standard_normal((10, 32)).astype(np.float32))
    searcher.save(str(root / 'index'))
    image = str(root / 'query.png')
    Image.fromarray(np.full((32, 32, 3), 128, np.uint8)).save(image)
    return str(root / 'index'), checkpoint, image


def _edited(built, tmp_path, edit):
    """A copy of the index whose config is rewritten by ``edit(data, marker)`` (data: the
    JSON config; returns (text, suffix)), its sha256 recorded in the manifest as an attacker
    would; and the marker file running code would create."""
    index, marker = str(tmp_path / 'index'), str(tmp_path / 'ran')
    shutil.copytree(built[0], index)
    with open(osp.join(index, 'manifest.json')) as f:
        manifest = json.load(f)
    old = manifest['files']['config']
    with open(osp.join(index, old)) as f:
        text, suffix = edit(json.load(f), marker)
    os.remove(osp.join(index, old))
    name = old.rsplit('.', 1)[0] + suffix
    with open(osp.join(index, name), 'w') as f:
        f.write(text)
    manifest['files']['config'] = name
    manifest['sha256'] = {n: sha256sum(osp.join(index, n)) for n in manifest['files'].values()}
    with open(osp.join(index, 'manifest.json'), 'w') as f:
        json.dump(manifest, f)
    return index, marker


def _dotted_call(data, marker):
    data['model']['neck'][0] = dict(type='os.system', command=f'touch {marker}')
    return json.dumps(data), '.json'


def _custom_imports(data, marker):
    data['custom_imports'] = dict(imports=['antigravity'])
    return json.dumps(data), '.json'


def _python(data, marker):
    return f"__import__('os').system('touch {marker}')\n" + \
        ''.join(f'{k} = {v!r}\n' for k, v in data.items()), '.py'


def _python_base(data, marker):
    base = osp.join(osp.dirname(marker), 'base.py')
    with open(base, 'w') as f:
        f.write(f"__import__('os').system('touch {marker}')\n")
    return json.dumps(dict(data, _base_=[base])), '.json'


@pytest.mark.parametrize('edit, message', [
    (_dotted_call, r'model\.neck\.0\.type: a config read as data may name only'),
    (_custom_imports, 'custom_imports: a config read as data'),
    (_python_base, '_base_: a config read as data'),
    (_python, r"keeps its model's config as Python \(config-\w+\.py, an older irtbox's index\)")])
def test_loading_an_index_folder_runs_no_code_from_it(built, tmp_path, edit, message):
    index, marker = _edited(built, tmp_path, edit)
    with pytest.raises(UntrustedConfigError, match=message):
        load_index_model(index)
    for command in (['query', index, built[2]], ['serve', index, '--port', '1']):
        with pytest.raises(SystemExit, match=f'search {command[0]}: .*{message}.*'
                           r'\(or pass --config CONFIG\)$'):
            search_tool.main(command)
    assert not osp.exists(marker)


def test_a_config_saved_as_data_loads_and_an_older_index_loads_with_its_config_named(
        built, tmp_path):
    index, checkpoint, image = built
    with open(osp.join(index, 'manifest.json')) as f:
        assert json.load(f)['files']['config'].endswith('.json')
    hits = search_tool.main(['query', index, image, '--k', '3'])[0]['hits']
    assert len(hits) == 3
    older, marker = _edited(built, tmp_path, lambda data, marker: (
        ''.join(f'{k} = {v!r}\n' for k, v in data.items()), '.py'))
    assert search_tool.main(['query', older, image, '--k', '3', '--config', TINY])[0]['hits'] \
        == hits
    assert len(ImageSearcher.load(older, model=load_index_model(older, config=TINY))) == 10
    # A model of the user's own modules: saved without its custom_imports (which a load would
    # import), loaded as data where its parts are registered, else with its config named.
    model = init_model(TINY, checkpoint, cfg_options={'custom_imports': dict(
        imports=['irtbox.models'], allow_failed_imports=False)})
    searcher = ImageSearcher(model)
    searcher.add(np.zeros((2, 32), np.float32) + 1)
    searcher.save(str(tmp_path / 'own'))
    assert 'custom_imports' not in load_index_model(str(tmp_path / 'own')).cfg
