"""A test-only config (train_dataloader = None) named where training parts are asked of it."""
import pytest

from irtbox.cli import train as train_tool
from irtbox.cli import worded
from irtbox.utils.config import ConfigError, load_config

TEST_ONLY = 'configs/irt/irt-o_deit-s_sop.py'


def test_option_into_a_part_the_config_lacks(in_root):
    # Before: MMEngine's "You may set `_delete_=True` to ignore the base config" TypeError.
    with pytest.raises(ConfigError, match=(
            r"^cfg_options train_dataloader.dataset.data_root='x': configs/irt/irt-o_deit-s_sop"
            r"\.py sets train_dataloader = None: the config has no such part")) as info:
        load_config(TEST_ONLY, {'train_dataloader.dataset.data_root': 'x'})
    assert worded(info.value).startswith("--cfg-options train_dataloader.dataset.data_root='x'")


def test_train_a_test_only_config(in_root, tmp_path):
    # Before: built the model, then "`_train_loop` should not be None".
    with pytest.raises(SystemExit, match=(
            f'{TEST_ONLY}: cannot train: it sets no train_dataloader, train_cfg, optim_wrapper '
            r'\(a test-only config\); evaluate it with tools/test.py')):
        train_tool.main([TEST_ONLY, '--work-dir', str(tmp_path / 'w')])
