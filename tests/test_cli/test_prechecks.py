"""Every command checks its inputs before it builds a model, dumps its environment and config,
or starts processes: one line per problem, all of them at once (issue 49 items 2 and 3)."""
import os
import subprocess
import sys

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
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(['bash', os.path.join(root, 'tools', 'dist_train.sh'), QUICKSTART, '8'],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHON=sys.executable, PYTHONPATH=root))
    assert done.returncode == 1 and done.stdout == ''
    (line, ) = done.stderr.splitlines()
    assert 'no dataset at train_dataloader.dataset.data_root' in line


# -- refusals start without torch (issue 49 item 5) -----------------------------------------
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Put first on PYTHONPATH: importing a name of IRTBOX_TEST_BLOCKED fails loudly (not an
# ImportError, which a library may catch), and at exit the number of modules imported is
# written to IRTBOX_TEST_MODULES.
GUARD = """import atexit, os, sys
BLOCKED = os.environ['IRTBOX_TEST_BLOCKED'].split(',')


class Guard:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + '.') for b in BLOCKED):
            raise RuntimeError(f'guard: {name} imported')


sys.meta_path.insert(0, Guard())


@atexit.register
def count():
    with open(os.environ['IRTBOX_TEST_MODULES'], 'w') as f:
        f.write(str(len(sys.modules)))
"""
HEAVY = 'torch,timm,mmengine.runner'
# What a refusal may import: mmengine's Config and registries, numpy, yaml (~470 modules when
# this was written; importing torch alone brings ~1000 more).
MODULE_BUDGET = 700


def refuse(folder, *command, blocked=HEAVY):
    """Run ``command`` (``irtbox ...``, ``tools/x.py ...`` or ``tools/x.sh ...``) in ``folder``
    under the guard; (exit status, stdout, stderr lines, modules imported)."""
    guard = folder.parent / f'{folder.name}-guard'
    guard.mkdir(exist_ok=True)
    (guard / 'sitecustomize.py').write_text(GUARD)
    modules = guard / 'modules'
    head, *rest = command
    line = ([sys.executable, '-m', 'irtbox', *rest] if head == 'irtbox' else
            ['bash', os.path.join(ROOT, head), *rest] if head.endswith('.sh') else
            [sys.executable, os.path.join(ROOT, head), *rest])
    done = subprocess.run(line, cwd=folder, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHON=sys.executable,
                                   PYTHONPATH=f'{guard}{os.pathsep}{ROOT}',
                                   IRTBOX_TEST_BLOCKED=blocked, IRTBOX_TEST_MODULES=str(modules)))
    return done.returncode, done.stdout, done.stderr.splitlines(), int(modules.read_text())


NO_DIGITS = (f"{QUICKSTART}: no dataset at train_dataloader.dataset.data_root='data/digits' "
             '(relative to {cwd}); prepare it with `irtbox prepare-digits --out data/digits`, '
             'or give its folder with --cfg-options train_dataloader.dataset.data_root=PATH')
TEST_ONLY = 'quickstart/irt-o_vit-tiny_digits.py'
SOP = 'irt/irt-o_deit-s_sop.py'
ZOO_NAME = 'irt-o_deit-s_sop'  # its config: SOP's
# (command, files the folder holds, the lines expected on stderr); {cwd}: the folder.
REFUSALS = {
    'missing dataset': (['irtbox', 'train', QUICKSTART], {}, [NO_DIGITS]),
    'missing dataset of a shipped config': (
        ['irtbox', 'test', SOP], {},
        [f"{SOP}: no dataset at test_dataloader.dataset.data_root='data/sop' (relative to "
         '{cwd}); prepare it with `irtbox prepare sop --root data/sop`, or give its folder with '
         '--cfg-options test_dataloader.dataset.data_root=PATH']),
    'missing dataset, tools/train.py': (['tools/train.py', QUICKSTART], {}, [NO_DIGITS]),
    'missing dataset, dist_train.sh': (['tools/dist_train.sh', QUICKSTART, '2'], {}, [NO_DIGITS]),
    'missing dataset, a model zoo name': (
        ['tools/test.py', ZOO_NAME], {},
        [f"{ZOO_NAME}: no dataset at test_dataloader.dataset.data_root='data/sop' (relative to "
         '{cwd}); prepare it with `irtbox prepare sop --root data/sop`, or give its folder '
         'with --cfg-options test_dataloader.dataset.data_root=PATH']),
    # The folder does not name the dataset: its class (a name in the config) does.
    'missing dataset in a folder of another name': (
        ['irtbox', 'test', SOP, '--cfg-options', 'test_dataloader.dataset.data_root=mine/products'],
        {}, [f"{SOP}: no dataset at test_dataloader.dataset.data_root='mine/products' (relative "
             'to {cwd}); prepare it with `irtbox prepare sop --root mine/products`, or give its '
             'folder with --cfg-options test_dataloader.dataset.data_root=PATH']),
    'missing checkpoint, tools/test.py': (
        ['tools/test.py', QUICKSTART, 'missing.pth'], {'data/digits/': ''},
        ['CKPT: checkpoint not found: missing.pth (expected a file or a URL)']),
    'missing resume checkpoint': (
        ['irtbox', 'train', QUICKSTART, '--resume', 'gone.pth'], {'data/digits/': ''},
        ['--resume: checkpoint not found: gone.pth (expected a file or a URL)']),
    'missing image folder, search build': (
        ['irtbox', 'search', 'build', QUICKSTART, 'w.pth', 'photos', 'index'], {'w.pth': ''},
        ["IMAGE_DIR: folder not found: 'photos' (relative to {cwd})"]),
    'missing image folder, extract': (
        ['irtbox', 'extract', QUICKSTART, 'w.pth', 'photos', 'out'], {'w.pth': ''},
        ["IMAGE_DIR: folder not found: 'photos' (relative to {cwd})"]),
    'missing checkpoint and unwritable --out, export': (
        ['irtbox', 'export', QUICKSTART, 'missing.pth', '--format', 'torchscript', '--out',
         'a_file/m.pt'], {'a_file': ''},
        ['CKPT: checkpoint not found: missing.pth (expected a file or a URL)',
         '--out {cwd}/a_file/m.pt: {cwd}/a_file is a file, not a folder; expected a path in a '
         'writable folder']),
    'config file not found, export': (
        ['tools/deployment/export.py', 'nope.py', 'none', '--format', 'torchscript', '--out',
         'm.pt'], {},
        ['export: config file not found: nope.py (not a file, not a config irtbox ships under '
         '{configs})']),
    'missing checkpoint, config and zoo folder, publish': (
        ['tools/misc/publish_model.py', 'missing.pth', 'a_file', '--config', 'nope.py'],
        {'a_file': ''},
        ['FileNotFoundError: config file not found: nope.py (not a file, not a config irtbox '
         'ships under {configs})',
         'CKPT: checkpoint not found: missing.pth (expected a file or a URL)',
         'OUT_DIR {cwd}/a_file: exists and is not a folder']),
    'missing index folder, images and checkpoint, search query': (
        ['irtbox', 'search', 'query', 'nowhere', 'a.png', '--checkpoint', 'gone.pth'], {},
        ['--checkpoint: checkpoint not found: gone.pth (expected a file or a URL)',
         "INDEX_DIR: folder not found: 'nowhere' (relative to {cwd})",
         "IMAGE: file not found: 'a.png' (relative to {cwd})"]),
    'missing images, search query': (
        ['tools/search.py', 'query', 'index', 'a.png', 'b.png'], {'index/': ''},
        ["IMAGE: file not found: 'a.png' (relative to {cwd})",
         "IMAGE: file not found: 'b.png' (relative to {cwd})"]),
    'missing index folder, search serve': (
        ['irtbox', 'search', 'serve', 'nowhere'], {},
        ["INDEX_DIR: folder not found: 'nowhere' (relative to {cwd})"]),
    'unwritable --show-dir': (
        ['irtbox', 'test', QUICKSTART, '--show-dir', 'a_file'], {'data/digits/': '', 'a_file': ''},
        ['--show-dir {cwd}/a_file: exists and is not a folder']),
    'flag the config refuses': (
        ['irtbox', 'train', QUICKSTART, '--auto-scale-lr'], {'data/digits/': ''},
        [f'--auto-scale-lr: {QUICKSTART} has no auto_scale_lr entry '
         '(e.g. auto_scale_lr = dict(base_batch_size=64)).']),
    'test-only config': (
        ['irtbox', 'train', TEST_ONLY], {'data/digits/': ''},
        [f'{TEST_ONLY}: cannot train: it sets no train_dataloader, train_cfg, optim_wrapper (a '
         f'test-only config); evaluate it with tools/test.py {TEST_ONLY} [CHECKPOINT], or train '
         'a config that has them.']),
    'config file not found': (
        ['irtbox', 'train', 'configs/irt/nope.py'], {},
        ['irtbox: FileNotFoundError: config file not found: configs/irt/nope.py (not a file, '
         'not a config irtbox ships under {configs}) (IRTBOX_DEBUG=1 shows the traceback)']),
    'config syntax': (
        ['irtbox', 'train', 'bad.py'], {'bad.py': 'model = dict(\n'},
        ["irtbox: SyntaxError: could not load config bad.py: '(' was never closed "
         '(bad.py, line 1) (IRTBOX_DEBUG=1 shows the traceback)']),
    'config value': (
        ['irtbox', 'test', 'mine.py'],
        {'data/digits/': '', 'mine.py': f"_base_ = ['irtbox::{QUICKSTART}']\n"
                                         "test_dataloader = dict(batch_size='4')\n"},
        ["irtbox: ConfigError: mine.py: test_dataloader.batch_size: expected a whole number "
         ">= 1, got '4' (IRTBOX_DEBUG=1 shows the traceback)"]),
    'cfg-options value': (
        ['irtbox', 'train', QUICKSTART, '--cfg-options', 'train_cfg.max_iters=many'],
        {'data/digits/': ''},
        ["irtbox: ConfigError: --cfg-options train_cfg.max_iters='many': expected a number, as "
         'train_cfg.max_iters = 500 in {config} (IRTBOX_DEBUG=1 shows the traceback)']),
}


@pytest.mark.parametrize('case', list(REFUSALS))
def test_a_refusal_imports_no_torch_timm_or_runner(case, tmp_path):
    """`irtbox train CONFIG` without data took ~7 s under load to say so, importing torch,
    timm and MMEngine's runner; the checks need none of them."""
    command, files, expected = REFUSALS[case]
    for name, text in files.items():  # a name ending in / is a folder
        (tmp_path / name.rstrip('/')).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith('/'):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text(text)
    status, out, err, modules = refuse(tmp_path, *command)
    from irtbox.utils.config import CONFIGS_DIR
    assert err == [line.format(cwd=tmp_path, configs=CONFIGS_DIR,
                               config=os.path.join(CONFIGS_DIR, QUICKSTART))
                   for line in expected]
    assert status == 1 and out == ''
    assert modules < MODULE_BUDGET


def test_list_models_imports_no_torch(tmp_path):
    """The zoo's index is YAML: listing it took 16 s under load, importing torch."""
    status, out, err, modules = refuse(tmp_path, 'irtbox', 'list-models', 'irt-o_deit-s')
    assert status == 0 and err == [] and 'irt-o_deit-s_sop' in out
    assert modules < MODULE_BUDGET


def test_a_misspelled_key_is_still_refused_before_any_work(tmp_path):
    """The registries' check of every key runs once the torch-free checks pass."""
    (tmp_path / 'data' / 'digits').mkdir(parents=True)  # an empty dataset folder: not missing
    status, out, err, _ = refuse(tmp_path, 'irtbox', 'train', QUICKSTART, '--cfg-options',
                                 'default_hooks.checkpoint.intervall=5', blocked='nothing')
    assert status == 1 and out == ''
    (line, ) = err
    assert "default_hooks.checkpoint.intervall: CheckpointHook takes no argument 'intervall'" \
        in line
