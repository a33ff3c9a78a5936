"""find_config: a file or a config irtbox ships (from any folder); resolve_config: or a zoo
name."""
import os.path as osp

import pytest

from irtbox.apis import init_model
from irtbox.apis.model_zoo import get_entry, resolve_config
from irtbox.utils.config import CONFIGS_DIR, find_config, load_config

SHIPPED = 'irt/irt-r_deit-s_1xb64-35k_sop.py'


def test_configs_live_in_the_package():
    import irtbox
    assert CONFIGS_DIR == osp.join(osp.dirname(irtbox.__file__), 'configs')
    assert osp.isfile(osp.join(CONFIGS_DIR, SHIPPED))


@pytest.mark.parametrize('name', [f'configs/{SHIPPED}', SHIPPED, SHIPPED[:-3]])
def test_a_shipped_config_is_found_from_any_folder(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # no configs/ here
    assert find_config(name) == osp.join(CONFIGS_DIR, SHIPPED)


def test_a_file_comes_first(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'configs' / 'irt').mkdir(parents=True)
    (tmp_path / 'configs' / SHIPPED).write_text('x = 1\n')
    assert find_config(f'configs/{SHIPPED}') == f'configs/{SHIPPED}'
    assert load_config(f'configs/{SHIPPED}').x == 1


def test_a_zoo_name_gives_its_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = 'irt-r_deit-s_1xb64-35k_sop'
    assert resolve_config(name) == get_entry(name).config
    assert load_config(resolve_config(name)).model.type
    # init_model takes any of these names (here a shipped config, from an empty folder).
    assert init_model('quickstart/irt-r_vit-tiny_1xb64-500_digits').input_spec.size == (32, 32)


def test_nothing_found_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        resolve_config('configs/irt/no_such.py')
    message = str(info.value)
    assert 'configs/irt/no_such.py' in message and CONFIGS_DIR in message
    assert 'list_models() lists them' in message
    with pytest.raises(FileNotFoundError, match='Did you mean the model irt-r_deit-s_1xb64-35k_sop'):
        resolve_config('irt-r_deit-s_1xb64-35k_sob')
    with pytest.raises(FileNotFoundError, match=f'not a config irtbox ships under {CONFIGS_DIR}'):
        find_config('irt-r_deit-s_1xb64-35k_sop')  # zoo names are the apis layer's


@pytest.mark.parametrize('text, message', [
    ('import torch\nx = torch.zeros(1)\n', r"line 2, 'x = torch.zeros\(1\)': blocked by MMEngine's "
     r'config loader \(RuntimeError\): a config that imports modules is read in its lazy-import '
     'mode'),
    ('x = 1\nassert x == 2\n', "line 2, 'assert x == 2': AssertionError without a message$")])
def test_an_error_without_a_message_names_the_config_line(tmp_path, text, message):
    path = tmp_path / 'c.py'
    path.write_text(text)
    with pytest.raises(Exception, match=rf'^could not load config {path}: {message}'):
        load_config(str(path))
