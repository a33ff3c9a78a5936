"""Config mistakes that used to be ignored silently get an error naming the key."""
import re

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


@pytest.mark.slow
@pytest.mark.parametrize('key', ['val_evaluator', 'test_evaluator'])
def test_an_evaluator_typo_says_what_was_meant(key, tmp_path):
    # Before: the registry's KeyError without a hint for val_evaluator; a typo in
    # test_evaluator was not checked by train at all (found after the whole training).
    with pytest.raises(ConfigError, match=re.escape(
            f"{TINY_CONFIG}: {key}.type: 'RetrievalMetrik' is not a registered metric or "
            "evaluator; did you mean 'RetrievalMetric'?")):
        train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path), '--cfg-options',
                         f'{key}.type=RetrievalMetrik'])


def test_a_count_that_is_no_whole_number_names_it(tmp_path):
    # Before: 253 lines ending in timm's "TypeError: 'float' object is not iterable".
    with pytest.raises(ValueError, match=re.escape(
            'TimmBackbone(vit_tiny_patch16_224): depth=1.5: expected a whole number')):
        train_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path), '--cfg-options',
                         'model.backbone.depth=1.5'])


@pytest.mark.slow
def test_tools_print_an_error_in_one_line_and_the_traceback_on_demand(tmp_path, capsys,
                                                                     monkeypatch):
    # Before: weight_decay=-1 (or partial_fc.sample_rate=0, a duplicated CSV row) printed a
    # 250-line traceback ending in the clear line.
    from irtbox.cli import run
    argv = [TINY_CONFIG, '--work-dir', str(tmp_path), '--cfg-options',
            'optim_wrapper.optimizer.weight_decay=-1']
    monkeypatch.delenv('IRTBOX_DEBUG', raising=False)
    with pytest.raises(SystemExit) as stop:
        run(train_tool.main, argv)
    assert stop.value.code == 1
    # Since issue 48 item 6 the value is refused by key before the dump (was torch's
    # "Invalid weight_decay value: -1" after the optimizer's build).
    assert capsys.readouterr().err == (
        f'irtbox: ConfigError: {TINY_CONFIG}: optim_wrapper.optimizer.weight_decay: expected a '
        'number >= 0, got -1 (IRTBOX_DEBUG=1 shows the traceback)\n')
    monkeypatch.setenv('IRTBOX_DEBUG', '1')
    with pytest.raises(ValueError, match='weight_decay: expected a number >= 0'):
        run(train_tool.main, argv)
