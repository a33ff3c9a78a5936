"""MMEngine's checkpoint loaders are irtbox's safe ones only while irtbox loads."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.runner.checkpoint import CheckpointLoader

from irtbox.apis import register_all_modules
from irtbox.engine import IrtboxRunner
from irtbox.utils.checkpoint import safe_checkpoint_loaders

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


class Payload:
    """Unpickling it would run code: a weights-only load must refuse it."""

    def __reduce__(self):
        return (print, ('this ran',))


def test_loaders_are_replaced_within_the_scope_only():
    register_all_modules()
    before = dict(CheckpointLoader._schemes)
    with safe_checkpoint_loaders():
        local = CheckpointLoader._get_checkpoint_loader('model.pth')
        assert local is not before['']
        assert local.__module__ == 'irtbox.utils.checkpoint'
    assert dict(CheckpointLoader._schemes) == before
    assert list(CheckpointLoader._schemes) == list(before)  # the order decides the match


@pytest.mark.slow
def test_runner_refuses_a_pickle_that_runs_code(tmp_path, capsys):
    path = str(tmp_path / 'evil.pth')
    torch.save({'state_dict': {}, 'meta': Payload()}, path)
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path / 'w')
    cfg.load_from = path
    runner = IrtboxRunner.from_cfg(cfg)
    with pytest.raises(RuntimeError, match='refused for safety'):
        runner.load_checkpoint(path)
    assert 'this ran' not in capsys.readouterr().out
