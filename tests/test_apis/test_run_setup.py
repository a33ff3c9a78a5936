"""The config and runner set-up that tools/train.py and tools/test.py share."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from irtbox.apis import DEFAULT_RUNNER, build_runner, check_checkpoint, load_run_config
from irtbox.engine import IrtboxRunner
from irtbox.registry import RUNNERS
from irtbox.utils.config import ConfigError

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')


@pytest.mark.slow
def test_work_dir_launcher_and_options():
    cfg = load_run_config(CONFIG, {'train_cfg.max_iters': 3})
    assert cfg.work_dir == osp.join('./work_dirs', 'irt-r_vit-tiny_1xb64-500_digits')
    assert cfg.launcher == 'none' and cfg.train_cfg.max_iters == 3
    assert load_run_config(CONFIG, work_dir='w').work_dir == 'w'
    assert load_run_config(CONFIG, {'work_dir': 'from_cfg'}).work_dir == 'from_cfg'


def test_check_checkpoint(tmp_path):
    path = tmp_path / 'a.pth'
    path.write_bytes(b'')
    assert check_checkpoint(str(path)) == str(path)
    assert check_checkpoint('https://x/y.pth') == 'https://x/y.pth'
    with pytest.raises(FileNotFoundError, match='checkpoint not found: .*b.pth'):
        check_checkpoint(str(tmp_path / 'b.pth'))


class _BuiltRunner(str):
    """What the fake ``from_cfg`` returns: the class name, and the hooks registered on it."""

    def register_hook(self, hook):
        self.__dict__.setdefault('hooks', []).append(type(hook).__name__)


@pytest.fixture
def built(monkeypatch):
    """The runner classes whose ``from_cfg`` was called, instead of building them."""
    calls = []
    monkeypatch.setattr(IrtboxRunner, 'from_cfg', classmethod(
        lambda cls, cfg: calls.append(cls) or _BuiltRunner(cls.__name__)))
    return calls


def test_the_dataset_count_check_is_added_unless_the_config_says_no(built):
    assert build_runner(Config(dict())).hooks == ['DatasetCountCheckHook']
    assert 'hooks' not in build_runner(Config(dict(check_dataset_counts=False))).__dict__


def test_default_runner_is_ours(built):
    assert DEFAULT_RUNNER == 'IrtboxRunner'
    assert build_runner(Config(dict(launcher='none'))) == 'IrtboxRunner'
    assert built == [IrtboxRunner]


def test_runner_type_is_honoured(built):
    class MyRunner(IrtboxRunner):
        pass

    RUNNERS.register_module(name='_TestRunnerType', module=MyRunner)
    try:
        assert build_runner(Config(dict(runner_type='_TestRunnerType'))) == 'MyRunner'
    finally:
        RUNNERS._module_dict.pop('_TestRunnerType')
    assert built == [MyRunner]


def test_unknown_runner_type_names_the_config(built, tmp_path):
    path = tmp_path / 'my_config.py'
    path.write_text("runner_type = 'NoSuchRunner'\n")
    with pytest.raises(ConfigError, match="my_config.py: runner_type 'NoSuchRunner' is not"):
        build_runner(Config.fromfile(str(path)))
    assert built == []


def test_launcher_gets_the_configs_dist_cfg(built, monkeypatch):
    started = []
    monkeypatch.setattr('irtbox.apis.run_setup.init_distributed',
                        lambda launcher, **kwargs: started.append((launcher, kwargs)))
    build_runner(Config(dict(launcher='pytorch', env_cfg=dict(
        dist_cfg=dict(backend='gloo', timeout=7200)))))
    build_runner(Config(dict(launcher='slurm')))
    backend = {} if torch.cuda.is_available() else dict(backend='gloo')
    assert started == [('pytorch', dict(backend='gloo', timeout=7200)), ('slurm', backend)]


def test_shipped_configs_wait_long_for_rank_0s_work():
    """NCCL's 10-minute default timeout killed jobs while rank 0 alone searched, fitted a
    whitening or merged an extraction: every shipped config inherits a longer one."""
    from irtbox.apis.model_zoo import resolve_config
    for name in ('irt/irt-r_deit-s_1xb64-35k_sop.py', 'dtop/r50vitb_sfm.py',
                 'quickstart/irt-l_vit-tiny_1xb64-500_digits.py'):
        cfg = Config.fromfile(resolve_config(name))
        assert cfg.env_cfg.dist_cfg.timeout >= 3600, name


def test_extraction_starts_the_group_with_the_configs_dist_cfg(monkeypatch, tmp_path):
    """extract_folder used to start the process group without the config's dist_cfg (so
    with NCCL's 10-minute timeout, shorter than rank 0's merge of a large extraction)."""
    from irtbox.apis.extract import extract_folder

    class Started(Exception):
        pass

    def start(launcher, **kwargs):
        raise Started(launcher, kwargs)

    monkeypatch.setattr('irtbox.apis.extract.init_distributed', start)
    path = tmp_path / 'config.py'
    path.write_text("model = dict(type='ImageRetriever')\n"
                    "env_cfg = dict(dist_cfg=dict(backend='gloo', timeout=1234))\n")
    with pytest.raises(Started) as started:
        extract_folder(str(path), None, str(tmp_path), str(tmp_path / 'out'), launcher='pytorch')
    assert started.value.args == ('pytorch', dict(backend='gloo', timeout=1234))


LOADERS = '''
train_dataloader = dict(batch_size=2, num_workers=2)
val_dataloader = dict(batch_size=2, num_workers=2, pin_memory=False, persistent_workers=False)
test_dataloader = [dict(batch_size=2), dict(batch_size=2, num_workers=1)]
'''


@pytest.mark.parametrize('cuda', [True, False])
def test_loaders_pin_memory_and_keep_workers_with_cuda(tmp_path, monkeypatch, cuda):
    path = tmp_path / 'loaders.py'
    path.write_text(LOADERS)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
    cfg = load_run_config(str(path))
    # Without CUDA nothing is added (pinning needs a GPU).
    pinned = dict(pin_memory=True) if cuda else {}
    persistent = dict(persistent_workers=True) if cuda else {}
    assert cfg.train_dataloader == dict(batch_size=2, num_workers=2, **pinned, **persistent)
    # What the config sets stays.
    assert cfg.val_dataloader == dict(batch_size=2, num_workers=2, pin_memory=False,
                                      persistent_workers=False)
    assert cfg.test_dataloader == [dict(batch_size=2, **pinned),  # no workers to keep
                                   dict(batch_size=2, num_workers=1, **pinned, **persistent)]


def test_tuple_mining_keeps_fresh_train_workers(tmp_path, monkeypatch):
    path = tmp_path / 'tuples.py'
    path.write_text(LOADERS + "custom_hooks = [dict(type='TupleMiningHook')]\n")
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    cfg = load_run_config(str(path))
    assert cfg.train_dataloader == dict(batch_size=2, num_workers=2, pin_memory=True)
    assert cfg.test_dataloader[1].persistent_workers


@pytest.mark.gpu
def test_loaders_pin_memory_on_this_gpu():
    cfg = load_run_config(CONFIG)
    assert all(cfg[key].pin_memory for key in ('train_dataloader', 'val_dataloader',
                                               'test_dataloader'))
