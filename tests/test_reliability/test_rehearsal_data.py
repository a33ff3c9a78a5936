"""A rehearsal that did not read the user's data says so: ``--data-root`` re-points
absolute data roots too (a missing folder refused), and a rehearsal on miniatures ends with
the data it did not check."""
import os.path as osp

import pytest
from mmengine.config import Config

from irtbox.ops.miniaturize import point_datasets
from irtbox.cli.rehearse import unchecked_data_line
from irtbox.utils.errors import ArgumentError
from tests.test_reliability.reliability_helpers import ROOT, TINY_CONFIG


def absolute_root_config(root):
    cfg = Config.fromfile(TINY_CONFIG)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader]['dataset']['data_root'] = root
    return cfg


def test_data_root_repoints_an_absolute_root(tmp_path):
    # Before: only a relative data_root was re-pointed: an absolute one was read as it was,
    # and "--data-root EMPTY_FOLDER" passed on the config's data.
    mine = tmp_path / 'mine'
    (mine / 'sop').mkdir(parents=True)
    cfg = absolute_root_config(osp.join(ROOT, 'tests', 'data', 'sop'))
    point_datasets(cfg, str(tmp_path / 'mini'), data_root=str(mine))
    assert cfg.train_dataloader.dataset.data_root == str(mine / 'sop')
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(ArgumentError, match=f'^data_root {empty}: the config\'s data_root '
                       f'.*tests/data/sop is looked up as {empty}/sop, which is not a folder'):
        point_datasets(absolute_root_config(osp.join(ROOT, 'tests', 'data', 'sop')),
                       str(tmp_path / 'mini'), data_root=str(empty))


def test_a_rehearsal_on_miniatures_names_the_data_it_did_not_check():
    # Before: a config whose data did not exist passed, and nothing said the real data was
    # not read (the real run then failed with FileNotFoundError).
    line = unchecked_data_line(TINY_CONFIG, {'train_dataloader.dataset.data_root': 'data/sop'})
    assert line == ('data: miniatures — your data at data/sop, tests/data/sop was not checked; '
                    'check it with irtbox check sop --root data/sop; irtbox check sop --root '
                    'tests/data/sop, or rehearse on it with --data-root')


RANK_FAILS = '''
import os, time
if os.environ['RANK'] == '1':
    print('building the evaluator', flush=True)
    raise KeyError('mAP')
time.sleep(2)  # rank 0 is ended by the launcher
'''


@pytest.mark.slow
def test_a_failed_phase_quotes_the_failing_ranks_exception(tmp_path):
    # Before: the summary quoted torchrun's boilerplate ("error_file: <N/A> | traceback : To
    # enable traceback see ..."); the real KeyError was hundreds of lines up in the log.
    import sys

    from irtbox.ops.rehearse import _failure_cause, _run_phase
    script = tmp_path / 'rank.py'
    script.write_text(RANK_FAILS)
    log = tmp_path / 'logs' / 'train.log'
    log.parent.mkdir()
    result = _run_phase('train', [sys.executable, '-m', 'torch.distributed.run',
                                  '--nproc-per-node=2', '--rdzv-backend=c10d',
                                  '--rdzv-endpoint=127.0.0.1:0', str(script)], str(log), 120)
    assert result.returncode != 0
    assert 'Root Cause' in log.read_text()
    assert _failure_cause(str(log)) == "rank 1: KeyError: 'mAP'"


def test_the_cause_is_found_under_torchs_rank_prefix(tmp_path):
    # torch's distributed error handler writes '[rank1]: ' before each traceback line, and a
    # rank can print a line after its traceback: the exception is still the one quoted.
    from irtbox.ops.rehearse import _failure_cause
    log = tmp_path / 'train.log'
    log.write_text('\n'.join([
        "[default1]:[rank1]: Traceback (most recent call last):",
        "[default1]:[rank1]:   File \"run.py\", line 3, in <module>",
        "[default1]:[rank1]:     raise KeyError('mAP')",
        "[default1]:[rank1]: KeyError: 'mAP'",
        "[default1]:a line printed after it",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-11-29_03:30:00",
        "  host      : here",
        "  rank      : 1 (local_rank: 1)",
    ]) + '\n')
    assert _failure_cause(str(log)) == "rank 1: KeyError: 'mAP'"
