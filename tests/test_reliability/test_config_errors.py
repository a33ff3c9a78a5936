"""Config mistakes that used to be ignored silently get an error naming the key."""
import pytest

from irtbox.utils.config import ConfigError, load_config
from tests.test_reliability.reliability_helpers import TINY_CONFIG
from irtbox.cli import train as train_tool


@pytest.mark.parametrize('typo, meant', [('trian_cfg', 'train_cfg'),
                                         ('optim_wraper', 'optim_wrapper')])
def test_misspelled_top_level_key(typo, meant, tmp_path):
    config = tmp_path / 'typo.py'
    config.write_text(f"_base_ = ['{TINY_CONFIG}']\n{typo} = dict(max_iters=1)\n")
    # Before: the runner ignored the misspelled key and trained with the base's values.
    with pytest.raises(ConfigError, match=f"{config}: unknown top-level key '{typo}'; "
                                          f"did you mean '{meant}'"):
        load_config(str(config))


def test_own_variables_pass(tmp_path):
    config = tmp_path / 'own.py'
    config.write_text(f"_base_ = ['{TINY_CONFIG}']\ntrain_eval_dataloader = None\n"
                      "_trian_cfg = 1\ndata_root = 'x'\n")
    assert load_config(str(config)).data_root == 'x'


@pytest.mark.parametrize('option, expected', [
    ('train_cfg.max_iters=abc', "train_cfg.max_iters='abc': expected a number"),
    ('optim_wrapper.optimizer.lr=fast', "optim_wrapper.optimizer.lr='fast': expected a number"),
    ('resume=maybe', "resume='maybe': expected True or False"),
])
def test_cfg_option_of_the_wrong_type(option, expected, tmp_path):
    with pytest.raises(ConfigError, match=expected) as err:
        train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path), '--cfg-options', option])
    assert TINY_CONFIG in str(err.value)


def test_cfg_option_of_a_compatible_type():
    cfg = load_config(TINY_CONFIG, {'optim_wrapper.optimizer.lr': 1, 'train_cfg.max_iters': 8,
                                    'model.head.loss_weights.koleo': 0.5, 'work_dir': 'w'})
    assert cfg.optim_wrapper.optimizer.lr == 1 and cfg.train_cfg.max_iters == 8
