"""A broken torch / torchvision pair is named with the pair to install (issue 49 item 4)."""
import pytest

from irtbox.cli import run, versions


@pytest.mark.parametrize('installed, problem', [
    ({'torch': '2.14.1+cu130', 'torchvision': '0.29.1+cu130'}, None),
    ({'torch': '2.5.1', 'torchvision': '0.20.1'}, None),
    # The issue's: the CPU torch with PyPI's (CUDA) torchvision of the same minor.
    ({'torch': '2.13.0+cpu', 'torchvision': '0.28.0'},
     'torch 2.13.0+cpu and torchvision 0.28.0 are not a pair (torch 2.13 pairs with torchvision '
     '0.28, of the same build); install them together: pip install torch==2.13.0 '
     'torchvision==0.28.* --index-url https://download.pytorch.org/whl/cpu'),
    ({'torch': '2.6.0', 'torchvision': '0.20.1'},
     'torch 2.6.0 and torchvision 0.20.1 are not a pair (torch 2.6 pairs with torchvision 0.21, '
     'of the same build); install them together: pip install torch==2.6.0 torchvision==0.21.*'),
    ({'torch': '2.6.0'}, None),
])
def test_the_pair(installed, problem):
    assert versions.torch_pair_problem(installed) == problem


def test_a_failing_command_names_the_pair(monkeypatch, capsys):
    monkeypatch.setattr(versions, 'installed_versions',
                        lambda: {'torch': '2.13.0+cpu', 'torchvision': '0.28.0'})

    def main(argv):
        raise RuntimeError('operator torchvision::nms does not exist')
    with pytest.raises(SystemExit):
        run(main, [])
    (line, ) = capsys.readouterr().err.splitlines()
    assert line.startswith('irtbox: RuntimeError: operator torchvision::nms does not exist; '
                           'torch 2.13.0+cpu and torchvision 0.28.0 are not a pair')


def test_other_errors_get_no_hint(capsys):
    def main(argv):
        raise ValueError('a plain error')
    with pytest.raises(SystemExit):
        run(main, [])
    assert capsys.readouterr().err.startswith('irtbox: ValueError: a plain error (IRTBOX_DEBUG')


def test_an_import_error_inside_timm_names_the_versions(monkeypatch):
    monkeypatch.setattr(versions, 'installed_versions',
                        lambda: {'torch': '2.1.0', 'torchvision': '0.16.0', 'timm': '1.0.31'})
    try:
        exec(compile('raise ImportError("cannot import name x from torch")',
                     '/site-packages/timm/layers/x.py', 'exec'))
    except ImportError as error:
        hint = versions.version_hint(error)
    assert hint.startswith('raised inside timm 1.0.31 under torch 2.1.0: if these versions do '
                           'not go together, install torch, torchvision and that package')
    assert versions.version_hint(ValueError('x')) == ''
