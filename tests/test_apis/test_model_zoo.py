"""The model zoo: every entry of model-index.yml builds; weights load from released files
(local, file://, http on 127.0.0.1), from timm's own hub cache, or fail with a clear message."""
import glob
import os
import os.path as osp
import socket
import subprocess
import sys
import textwrap

import pytest
import torch
import yaml

from irtbox.apis import (CheckpointMismatchError, ModelNotReleasedError, UnknownModelError,
                         get_entry, get_model, init_model, list_models)
from irtbox.apis import model_zoo
from irtbox.apis.model_zoo import BadZooEntryError, ZooEntryMismatchError, read_index
from irtbox.utils.download import ChecksumError, sha256sum

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


def metafile_models():
    """Name -> raw entry, read with plain yaml from the files model-index.yml imports."""
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        imports = yaml.safe_load(f)['Import']
    models = {}
    for rel in imports:
        with open(osp.join(ROOT, rel)) as f:
            models.update({m['Name']: m for m in yaml.safe_load(f)['Models']})
    return models


RAW = metafile_models()


@pytest.fixture(autouse=True)
def no_user_index(monkeypatch, tmp_path):
    monkeypatch.delenv('IRTBOX_MODEL_INDEX', raising=False)
    monkeypatch.setenv('IRTBOX_HOME', str(tmp_path / 'irtbox_home'))


def test_every_metafile_is_indexed():
    with open(osp.join(ROOT, 'model-index.yml')) as f:
        imports = {osp.normpath(p) for p in yaml.safe_load(f)['Import']}
    pattern = osp.join(ROOT, 'configs', '**', 'metafile.yml')
    found = {osp.relpath(p, ROOT) for p in glob.glob(pattern, recursive=True)}
    assert found == imports


@pytest.mark.slow
def test_list_models_filters():
    assert list_models() == sorted(RAW)
    released = sorted(n for n, m in RAW.items() if m.get('Weights') is not None)
    assert list_models(with_weights=True) == released
    assert list_models(with_weights=False) == sorted(set(RAW) - set(released))
    assert list_models('irt-o_*') == ['irt-o_deit-s_cub', 'irt-o_deit-s_inshop', 'irt-o_deit-s_sop']
    assert list_models('off-the-shelf') == [f'dml_dinov2-vit-b_off-the-shelf_{d}'
                                            for d in ('cars196', 'cub', 'inat2018', 'sop')]


def test_dml_benchmark_configs_have_entries():
    configs = {osp.relpath(p, ROOT) for p in glob.glob(
        osp.join(ROOT, 'configs', 'dml_benchmark', 'dml_*.py'))}
    assert len(configs) == 49
    assert configs <= {m['Config'] for m in RAW.values()}


# One entry of each family is built through get_model; every entry's config is built (on the
# meta device, its shapes checked) by tests/test_configs/test_build_configs.py, once.
FAMILY_ENTRIES = ['irt-r_deit-s_1xb64-35k_sop', 'irt-r_deit-s-lw_1xb5-100e_sfm120k',
                  'dtop_r50-vit-b_8xb8-30e_gldv2clean',
                  'dml_dinov2-vit-b_contrastive_1xb256-39k_cub']


def test_every_entry_names_a_config_that_the_config_tests_build():
    from tests.test_configs.test_build_configs import CONFIGS
    built = {osp.join('configs', c).replace(os.sep, '/') for c in CONFIGS}
    for name, raw in RAW.items():
        assert osp.isfile(osp.join(ROOT, raw['Config'])), name
        assert raw['Config'] in built, name
    collection = {name: raw['In Collection'] for name, raw in RAW.items()}
    assert {collection[name] for name in FAMILY_ENTRIES} == set(collection.values())


@pytest.mark.slow
@pytest.mark.parametrize('name', FAMILY_ENTRIES)
def test_an_entry_of_each_family_builds(name, timm_cache):
    """get_model(pretrained=False) builds it (timm_cache refuses a pretrained download, so
    this also checks that pretrained=False reaches the backbone)."""
    model = get_model(name, pretrained=False)
    assert not model.training and model.zoo_entry.name == name
    assert osp.realpath(model.cfg.filename) == osp.realpath(osp.join(ROOT, RAW[name]['Config']))


@pytest.mark.slow
@pytest.mark.parametrize('name', [n for n, m in RAW.items()
                                  if (m.get('Weights') or {}).get('Source') == 'timm'])
def test_timm_entries_match_their_config(name):
    """The weights named by the entry are the ones timm loads for the config's backbone."""
    import timm

    from irtbox.utils.config import load_config
    entry = get_entry(name)
    backbone = load_config(entry.config).model.backbone
    assert backbone.pretrained is True
    resolved = timm.get_pretrained_cfg(backbone.model_name)
    assert f'{resolved.architecture}.{resolved.tag}' == entry.weights['pretrained']


def test_not_released_says_how_to_train():
    message = r'Train it from its config .*irt-r_deit-s_1xb64-35k_sop\.py'
    with pytest.raises(ModelNotReleasedError, match=message):
        get_model('irt-r_deit-s_1xb64-35k_sop')


def test_unknown_name_suggests():
    with pytest.raises(UnknownModelError, match='Did you mean: .*irt-r_deit-s_1xb64-35k_sop'):
        get_entry('irt-r_deit-s_35k_sop')


def write_zoo(folder, weights, name='my-model', config=TINY):
    index = osp.join(folder, 'index.yml')
    with open(index, 'w') as f:
        yaml.safe_dump({'Models': [{'Name': name, 'Config': config, 'Weights': weights}]}, f)
    return index


@pytest.fixture
def released(tmp_path):
    """A tiny model's weights saved as safetensors, and the model itself."""
    from safetensors.torch import save_file
    torch.manual_seed(0)
    model = init_model(TINY)
    path = str(tmp_path / 'w.safetensors')
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)
    return model, path


def embed(model):
    torch.manual_seed(1)
    with torch.no_grad():
        return model(torch.randn(3, 3, 32, 32), mode='tensor')


@pytest.mark.slow
@pytest.mark.parametrize('form', ['relative', 'absolute', 'file'])
def test_extra_index_local_weights(form, released, tmp_path, monkeypatch):
    model, path = released
    url = dict(relative='w.safetensors', absolute=path, file='file://' + path)[form]
    index = write_zoo(str(tmp_path), {'URL': url, 'SHA256': sha256sum(path)})
    monkeypatch.setenv('IRTBOX_MODEL_INDEX', index)
    assert 'my-model' in list_models(with_weights=True)
    assert torch.equal(embed(get_model('my-model')), embed(model))


@pytest.mark.slow
def test_extra_index_argument_and_wrong_hash(released, tmp_path):
    model, path = released
    index = write_zoo(str(tmp_path), {'URL': path, 'SHA256': '0' * 64})
    with pytest.raises(ChecksumError):
        get_model('my-model', index=index)
    assert torch.equal(embed(get_model('my-model', pretrained=path, index=index)), embed(model))


@pytest.mark.slow
def test_extra_index_overrides_builtin(released, tmp_path):
    model, path = released
    index = write_zoo(str(tmp_path), {'URL': path, 'SHA256': sha256sum(path)},
                      name='irt-r_deit-s_1xb64-35k_sop')
    assert get_entry('irt-r_deit-s_1xb64-35k_sop', index).status == 'released'
    assert torch.equal(embed(get_model('irt-r_deit-s_1xb64-35k_sop', index=index)), embed(model))


@pytest.mark.slow
def test_wrong_checkpoint_is_refused(tmp_path):
    other = init_model(TINY, cfg_options={'model.backbone.embed_dim': 16})
    path = str(tmp_path / 'other.pth')
    torch.save({'state_dict': other.state_dict()}, path)
    index = write_zoo(str(tmp_path), None)
    with pytest.raises(CheckpointMismatchError, match='shape mismatches'):
        get_model('my-model', pretrained=path, index=index)


@pytest.mark.parametrize('text, message', [
    ('Models: [{Name: a}]', 'needs "Name" and "Config"'),
    ('Models: [{Name: a, Config: c.py, Weights: {URL: w.pth, SHA256: abc}}]', '64 hex digits'),
    ('Models: [{Name: a, Config: c.py, Weights: {Source: timm}}]', 'Pretrained'),
    ('Models: [{Name: a, Config: c.py, Weights: {Size: 3}}]', 'needs a "URL"'),
    ('Models: [{Name: a, Config: c.py, Weights: {URL: w.pth, Size: -3}}]',
     r'"Size" \(the file.s size in bytes\) must be None or a positive integer, got -3'),
    ("Models: [{Name: a, Config: c.py, Weights: {URL: w.pth, 'Embedding Dim': x}}]",
     r'"Embedding Dim" \(the embedding dimension\) must be None or a positive integer'),
    ('Models: [{Name: a, Config: [c.py]}]', '"Config" must be a path'),
    ('Models: [{Name: a, Config: c.py, Results: [3]}]', '"Results" must be a list of mappings'),
    ('Import: [missing.yml]', 'missing.yml, which does not exist'),
    ('Models: [{Name: a, Config: c.py}, {Name: a, Config: c.py}]', 'defined twice'),
    ('Models: [a: b: c]', 'not valid YAML'),
    ('- a\n- b', 'expected a mapping'),
])
def test_bad_index_is_named(text, message, tmp_path):
    index = tmp_path / 'bad.yml'
    index.write_text(text)
    with pytest.raises((ValueError, FileNotFoundError), match=message) as info:
        read_index(str(index))
    assert str(index) in str(info.value)


def run_isolated(code, env):
    """Run ``code`` in a fresh interpreter: huggingface_hub reads HF_HOME / HF_HUB_OFFLINE
    when imported."""
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=ROOT,
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_timm_weights_through_timm_offline(tmp_path):
    """IRT_O loads timm's public DeiT-S weights through timm's own hub mechanism: here from
    a Hugging Face cache prepared in the official layout, with no network (the hub's address
    a closed port of 127.0.0.1); without the cache, get_model fails at once (not after
    huggingface_hub's retries, ~50 s) in one line that names the weights and the ways out."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        closed = f'http://127.0.0.1:{s.getsockname()[1]}'
    code = '''
        import os, time, timm, torch
        from safetensors.torch import save_file
        from irtbox.apis import get_model
        started = time.monotonic()
        try:
            get_model('irt-o_deit-s_sop')
        except RuntimeError as err:
            assert time.monotonic() - started < 10, time.monotonic() - started
            assert 'deit_small_patch16_224.fb_in1k' in str(err) and '\\n' not in str(err), err
            assert 'the Hugging Face hub cannot be reached' in str(err), err
            assert "get_model(name, cfg_options=...)" in str(err), err
            print('missing-ok')
        repo = os.path.join(os.environ['HF_HOME'], 'hub',
                            'models--timm--deit_small_patch16_224.fb_in1k')
        os.makedirs(os.path.join(repo, 'refs'))
        os.makedirs(os.path.join(repo, 'snapshots', 'c' * 40))
        open(os.path.join(repo, 'refs', 'main'), 'w').write('c' * 40)
        torch.manual_seed(0)
        ref = timm.create_model('deit_small_patch16_224', pretrained=False)
        save_file({k: v.contiguous() for k, v in ref.state_dict().items()},
                  os.path.join(repo, 'snapshots', 'c' * 40, 'model.safetensors'))
        model = get_model('irt-o_deit-s_sop')
        got = model.backbone.model.state_dict()
        assert all(torch.equal(got[k], v) for k, v in ref.state_dict().items() if k in got)
        print('loaded-ok', model.zoo_entry.status)
    '''
    result = run_isolated(code, dict(HF_HOME=str(tmp_path / 'hf'), HF_ENDPOINT=closed,
                                     HF_HUB_OFFLINE='0'))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ['missing-ok', 'loaded-ok', 'timm']


@pytest.mark.slow
def test_size_and_embedding_dim_are_checked(released, tmp_path):
    """The entry's Size is the file's (refused as a sha256 mismatch is) and its Embedding Dim
    the built model's (refused naming both numbers); right ones load."""
    model, path = released
    size, digest = os.path.getsize(path), sha256sum(path)
    index = write_zoo(str(tmp_path), {'URL': path, 'SHA256': digest, 'Size': size + 1,
                                      'Embedding Dim': 32})
    with pytest.raises(ChecksumError, match=f"size mismatch for {path}: the zoo entry "
                                            f"'my-model' .* says Size {size + 1} bytes, the "
                                            f"file {path} has {size}"):
        get_model('my-model', index=index)
    index = write_zoo(str(tmp_path), {'URL': path, 'SHA256': digest, 'Size': size,
                                      'Embedding Dim': 64})
    with pytest.raises(ZooEntryMismatchError, match='says "Embedding Dim: 64", but the model '
                                                    'built from .*tiny_irt.py with its weights '
                                                    'gives 32-d embeddings'):
        get_model('my-model', index=index)
    index = write_zoo(str(tmp_path), {'URL': path, 'SHA256': digest, 'Size': size,
                                      'Embedding Dim': 32})
    assert torch.equal(embed(get_model('my-model', index=index)), embed(model))


@pytest.mark.slow
def test_a_bad_entry_blocks_only_itself(released, tmp_path, monkeypatch, capsys):
    """One malformed entry of an extra index (IRTBOX_MODEL_INDEX): the built-in models and
    the index's good entries list and load, the bad ones are reported once each, naming the
    file, and asking for one by name gives its error (also when it would replace a built-in
    entry)."""
    from irtbox.cli import list_models as list_tool
    model, path = released
    index = tmp_path / 'index.yml'
    index.write_text(yaml.safe_dump({'Models': [
        {'Name': 'my-model', 'Config': TINY, 'Weights': {'URL': path}},
        {'Name': 'bad-hash', 'Config': TINY, 'Weights': {'URL': path, 'SHA256': 'abc'}},
        {'Name': 'irt-r_deit-s_1xb64-35k_sop', 'Config': TINY, 'Weights': {'Size': 3}},
        {'Config': TINY}]}))
    monkeypatch.setenv('IRTBOX_MODEL_INDEX', str(index))
    monkeypatch.setattr(model_zoo, '_WARNED', set())
    warnings = []
    monkeypatch.setattr(model_zoo, 'print_log', lambda msg, **kw: warnings.append(msg))
    names = list_models()
    assert 'my-model' in names and 'irt-o_deit-s_sop' in names
    assert not {'bad-hash', 'irt-r_deit-s_1xb64-35k_sop'} & set(names)
    assert torch.equal(embed(get_model('my-model')), embed(model))
    assert get_entry('irt-o_deit-s_sop').status == 'timm'
    with pytest.raises(BadZooEntryError, match=f"{index}, model 'bad-hash': .SHA256. must be"):
        get_model('bad-hash')
    with pytest.raises(BadZooEntryError, match="model 'irt-r_deit-s_1xb64-35k_sop'.*needs a "
                                               '"URL"'):
        get_model('irt-r_deit-s_1xb64-35k_sop')
    table = list_tool.main([])
    assert 'my-model' in [row['name'] for row in table]
    assert len(warnings) == 3 and all(str(index) in w for w in warnings), warnings
    assert "get_model('bad-hash') raises this error" in ' '.join(warnings)
