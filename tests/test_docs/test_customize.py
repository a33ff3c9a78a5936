"""docs/customize.md's example as a user runs it: its files written as the page shows them,
its commands run as written, in an empty folder; and its mistakes (no PYTHONPATH, a shipped
config named as a relative _base_) stopped in one line."""
import os
import os.path as osp
import re
import shutil
import stat
import subprocess
import sys

import pytest

from irtbox.cli import train as train_tool
from irtbox.utils.checkpoint import safe_torch_load
from tests.doc_pages import code_blocks

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def write_project(folder):
    """The page's Python blocks, each written to the file its first line names; the
    commands of its bash block."""
    commands = []
    for language, text in code_blocks('customize.md'):
        named = re.match(r'# (my_project/\w+\.py)\n', text)
        if language == 'python' and named:  # not the built-in dataset's (test_dataset_page.py)
            name = named.group(1)
            os.makedirs(osp.join(folder, osp.dirname(name)), exist_ok=True)
            with open(osp.join(folder, name), 'w') as f:
                f.write(text)
        elif language == 'bash':
            commands.append(text)
    assert len(commands) == 1
    return commands[0]


@pytest.mark.slow
def test_the_page_runs_as_written(tmp_path, digits_root):
    commands = write_project(str(tmp_path))
    # The quick start's data (its train split linked: the run only reads it), its test split
    # cut to 10 images a class to keep the test short (the evaluation still has Recall@8).
    (tmp_path / 'data' / 'digits').mkdir(parents=True)
    (tmp_path / 'data' / 'digits' / 'train').symlink_to(digits_root / 'train')
    for digit in sorted(os.listdir(digits_root / 'test')):
        (tmp_path / 'data' / 'digits' / 'test' / digit).mkdir(parents=True)
        for name in sorted(os.listdir(digits_root / 'test' / digit))[:10]:
            shutil.copy(digits_root / 'test' / digit / name,
                        tmp_path / 'data' / 'digits' / 'test' / digit / name)
    # `irtbox` is this checkout's, whatever PYTHONPATH the command sets.
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    shim = bin_dir / 'irtbox'
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="$PYTHONPATH:{ROOT}" exec {sys.executable} -m irtbox '
                    '"$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f'{bin_dir}{os.pathsep}{os.environ["PATH"]}')
    done = subprocess.run(['bash', '-e', '-c', commands], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    work_dir = tmp_path / 'work_dirs' / 'my_config'
    # The model trained is the page's: its pooler in place of the base's CLS token.
    dumped = (work_dir / 'my_config.py').read_text()
    assert "type='TopKPool'" in dumped and 'ClsTokenPool' not in dumped
    state = safe_torch_load(str(work_dir / 'iter_2.pth'))
    assert state['meta']['iter'] == 2
    assert 'recall@1' in done.stdout + done.stderr  # the evaluation after the 2 iterations


@pytest.mark.slow
def test_without_pythonpath_a_missing_module_is_one_line(tmp_path, monkeypatch, capsys):
    write_project(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        train_tool.main(['my_project/my_config.py'])
    assert str(stop.value.code) == (
        "my_project/my_config.py: custom_imports: no module named 'my_pool' on the Python path; "
        'put the folder that holds it on PYTHONPATH (e.g. PYTHONPATH=my_project when it is '
        'my_project/my_pool.py)')
    assert capsys.readouterr().out == ''  # nothing before it


def test_a_shipped_config_named_as_a_relative_base_gets_the_prefix(tmp_path):
    from irtbox.utils.config import load_config
    (tmp_path / 'mine.py').write_text(
        "_base_ = ['quickstart/irt-l_vit-tiny_1xb64-500_digits.py']\n")
    with pytest.raises(FileNotFoundError, match=r"_base_ 'quickstart/irt-l_vit-tiny_1xb64-500"
                       r"_digits.py': no such file .*; the config irtbox ships is "
                       r'irtbox::quickstart/irt-l_vit-tiny_1xb64-500_digits.py'):
        load_config(str(tmp_path / 'mine.py'))
    (tmp_path / 'typo.py').write_text("_base_ = ['irtbox::quickstart/irt-l_digits.py']\n")
    with pytest.raises(FileNotFoundError, match='irtbox ships no config quickstart/irt-l_digits'):
        load_config(str(tmp_path / 'typo.py'))
