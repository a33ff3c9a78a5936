"""The irtbox command: each command runs the function of its script."""
import importlib
import re
import subprocess
import sys

import pytest

import irtbox
from irtbox.cli.main import COMMANDS, main


def test_every_command_is_a_cli_module_with_main():
    for name, (module, what) in COMMANDS.items():
        assert callable(importlib.import_module(f'irtbox.cli.{module}').main), name
        assert what


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(['--version'])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == \
        f'irtbox {irtbox.__version__}'
    with pytest.raises(SystemExit):
        main(['--help'])
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


@pytest.mark.parametrize('argv', [[]] + [[name] for name in COMMANDS])
def test_help_is_plain_text_without_rest_markup(argv, capsys):
    """--help shows module docstrings: ``literal`` and :func:`role` markup is taken out."""
    with pytest.raises(SystemExit):
        main(argv + ['--help'])
    out = capsys.readouterr().out
    assert out.startswith('usage: irtbox') and '``' not in out
    assert not re.search(r':\w+:`', out), out


# `python -m irtbox ARGS`, then whether torch, timm or mmengine was imported.
IMPORTS_TORCH = """import runpy, sys
sys.argv = ['irtbox'] + sys.argv[1:]
try:
    runpy.run_module('irtbox', run_name='__main__')
except SystemExit:
    pass
print(any(m in sys.modules for m in ('torch', 'timm', 'mmengine')))"""
# Their --help needs nothing of torch's: it starts at once (docs/benchmarks.md). The others'
# list what a registry or a torch module holds (datasets, input sizes, axes).
LIGHT_HELP = ['train', 'test', 'extract', 'search', 'export', 'list-models', 'publish',
              'prepare-digits', 'browse-results', 'plot-embeddings', 'analyze-embeddings',
              'plot-sweep']


@pytest.mark.parametrize('argv', [[]] + [[name] for name in LIGHT_HELP])
def test_help_does_not_import_torch(argv):
    """Nor timm or mmengine (issue 49 item 5: `irtbox --help` took 15-17 s under load)."""
    out = subprocess.run([sys.executable, '-c', IMPORTS_TORCH, *argv, '--help'],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith('usage: irtbox') and out.splitlines()[-1] == 'False', out[-500:]


@pytest.mark.parametrize('argv', [
    ['train'], ['test', 'c.py', '--out', 'x.txt'], ['train', 'c.py', '--resume', 'a', '--no-resume'],
    ['extract', 'c.py'], ['search', 'build', 'c.py'], ['train', 'c.py', '--nproc', '0']])
def test_a_refused_command_line_imports_none_of_them(argv):
    done = subprocess.run([sys.executable, '-c', IMPORTS_TORCH, *argv], capture_output=True,
                          text=True)
    assert done.stdout.splitlines()[-1] == 'False' and 'error:' in done.stderr, done.stderr


def test_module_doc_reads_the_docstring_without_importing():
    from irtbox.cli import module_doc
    for name in ('irtbox.datasets.digits', 'irtbox.ops.sweeps.figures'):
        assert module_doc(name) == importlib.import_module(name).__doc__


@pytest.mark.slow
def test_a_command_gets_its_arguments_and_names_itself(capsys, tmp_path):
    counts = main(['prepare-digits', '--out', str(tmp_path / 'digits'), '--size', '8'])
    assert counts['train'] > 0 and (tmp_path / 'digits' / 'train').is_dir()
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(['train', '--help'])
    assert capsys.readouterr().out.startswith('usage: irtbox train')
    assert sys.argv[0] != 'irtbox train'  # put back


def test_unknown_command_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(['trian'])
    assert exit_info.value.code == 2 and "invalid choice: 'trian'" in capsys.readouterr().err


@pytest.mark.slow
def test_python_m_irtbox_lists_the_zoo():
    """The console entry point (as `irtbox` and `python -m irtbox` run it) exits 0 and
    prints only the command's output (not its return value)."""
    done = subprocess.run([sys.executable, '-m', 'irtbox', 'list-models', 'irt-r_deit-s*'],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'irt-r_deit-s_1xb64-35k_sop' in done.stdout and "{'name'" not in done.stderr
