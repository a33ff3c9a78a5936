"""Every command checks its inputs before it builds a model, dumps its environment and config,
or starts processes: one line per problem, all of them at once (issue 49 items 2 and 3)."""
import os

import pytest

from irtbox.cli import extract as extract_tool
from irtbox.cli import search as search_tool
from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool

QUICKSTART = 'quickstart/irt-r_vit-tiny_1xb64-500_digits.py'


@pytest.fixture
def fresh_folder(tmp_path, monkeypatch):
    """A folder without data, and no launcher may start: the check comes first."""
    monkeypatch.chdir(tmp_path)

    def no_launch(*args):
        raise AssertionError(f'a launcher was started: {args}')
    monkeypatch.setattr(os, 'execv', no_launch)
    return tmp_path


def lines_of(stop: pytest.ExceptionInfo) -> list:
    return str(stop.value.code).splitlines()


def test_several_processes_without_data_stop_before_any_rank(fresh_folder, capsys):
    """`tools/dist_train.sh CONFIG 8` (= `irtbox train CONFIG --nproc 8`) without data: one
    line, before torchrun (84 lines under 8 ranks before)."""
    with pytest.raises(SystemExit) as stop:
        train_tool.main([QUICKSTART, '--nproc', '8'])
    (line, ) = lines_of(stop)
    assert line.startswith(f"{QUICKSTART}: no dataset at train_dataloader.dataset.data_root="
                           "'data/digits'")
    assert 'irtbox prepare-digits --out data/digits' in line
    assert capsys.readouterr().out == ''
    assert not (fresh_folder / 'work_dirs').exists()


def test_test_names_a_missing_dataset_and_missing_weights_at_once(fresh_folder, capsys):
    """Before: 183 lines of dump, then only the weights error."""
    with pytest.raises(SystemExit) as stop:
        test_tool.main([QUICKSTART, 'missing.pth', '--nproc', '2'])
    data, weights = lines_of(stop)
    assert data.startswith(f"{QUICKSTART}: no dataset at test_dataloader.dataset.data_root=")
    assert weights == 'CKPT: checkpoint not found: missing.pth (expected a file or a URL)'
    out = capsys.readouterr()
    assert out.out == '' and out.err == ''


def test_a_config_value_and_a_missing_dataset_at_once(fresh_folder):
    (fresh_folder / 'mine.py').write_text(f"_base_ = ['irtbox::{QUICKSTART}']\n"
                                          "test_dataloader = dict(batch_size='4')\n")
    with pytest.raises(SystemExit) as stop:
        test_tool.main(['mine.py'])
    value, data = lines_of(stop)
    assert value == ("ConfigError: mine.py: test_dataloader.batch_size: expected a whole "
                     "number >= 1, got '4'")
    assert 'no dataset at test_dataloader' in data


def test_extract_and_search_build_check_their_inputs_first(fresh_folder):
    for main, argv in ((extract_tool.main, [QUICKSTART, 'missing.pth', 'photos', 'out']),
                       (search_tool.main, ['build', QUICKSTART, 'missing.pth', 'photos',
                                           'index'])):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        weights, folder = lines_of(stop)
        assert weights.startswith('CKPT: checkpoint not found: missing.pth')
        assert folder == f"IMAGE_DIR: folder not found: 'photos' (relative to {fresh_folder})"
    assert sorted(os.listdir(fresh_folder)) == []


@pytest.mark.slow
def test_dist_train_sh_without_data_prints_one_line(tmp_path):
    """The script itself, as the issue ran it: exit status 1, one line on stderr, nothing on
    stdout (no torchrun banner, no rank's line)."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(['bash', os.path.join(root, 'tools', 'dist_train.sh'), QUICKSTART, '8'],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHON=sys.executable, PYTHONPATH=root))
    assert done.returncode == 1 and done.stdout == ''
    (line, ) = done.stderr.splitlines()
    assert 'no dataset at train_dataloader.dataset.data_root' in line
