"""What a new user's first training says when something it needs is not there: a dataset
never prepared, pretrained weights without a network. One line with the way out, at once."""
import os
import socket
import time

import pytest

from irtbox.cli import train as train_tool


@pytest.mark.slow
def test_a_missing_dataset_is_one_line_naming_the_prepare_command(tmp_path, monkeypatch, capsys):
    """From a fresh folder: the first (and only) line names the command, before any dump."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        train_tool.main(['irt/irt-l_deit-s_1xb64-35k_sop.py'])
    message = str(stop.value.code)
    assert message.splitlines() == [message]
    assert message.startswith('irt/irt-l_deit-s_1xb64-35k_sop.py: no dataset at '
                              "train_dataloader.dataset.data_root='data/sop'")
    assert 'prepare it with `irtbox prepare sop --root data/sop`' in message
    assert 'train_dataloader.dataset.data_root=PATH' in message
    out = capsys.readouterr()
    assert out.out == '' and out.err == ''  # no environment or config dump before it
    assert not os.path.exists(tmp_path / 'work_dirs')


@pytest.mark.slow
def test_pretrained_weights_without_a_network_fail_at_once(tmp_path, monkeypatch, digits_root):
    """The hub's address a closed port of 127.0.0.1, an empty cache: the training stops within
    seconds (huggingface_hub alone retries ~50 s) with the one-line message."""
    from huggingface_hub import constants
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        closed = f'http://127.0.0.1:{s.getsockname()[1]}'
    monkeypatch.setattr(constants, 'ENDPOINT', closed)
    monkeypatch.setattr(constants, 'HUGGINGFACE_CO_URL_TEMPLATE',
                        closed + '/{repo_id}/resolve/{revision}/{filename}')
    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', False)
    monkeypatch.setattr(constants, 'HF_HUB_CACHE', str(tmp_path / 'hub'))
    (tmp_path / 'data').mkdir()
    (tmp_path / 'data' / 'digits').symlink_to(digits_root)  # read only
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    with pytest.raises(SystemExit) as stop:
        train_tool.main(['quickstart/irt-r_vit-tiny_1xb64-500_digits.py',
                         '--cfg-options', 'model.backbone.pretrained=True'])
    assert time.monotonic() - started < 10
    message = str(stop.value.code)
    assert message.splitlines() == [message]
    assert message.startswith("quickstart/irt-r_vit-tiny_1xb64-500_digits.py: cannot get timm's "
                              "pretrained weights of 'vit_tiny_patch16_224': the Hugging Face "
                              f'hub cannot be reached ({closed}: ConnectError')
