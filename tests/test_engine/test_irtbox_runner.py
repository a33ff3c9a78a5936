"""IrtboxRunner's own behaviour beyond MMEngine's (checkpoints and resume: tests/test_reliability)."""
import glob
import os.path as osp

import mmengine.runner.runner as mmengine_runner
from mmengine.config import Config

from irtbox.engine import IrtboxRunner

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


def test_runs_started_in_the_same_second_keep_their_own_logs(tmp_path, monkeypatch):
    """MMEngine names a run's logger <config>_<timestamp> and reuses an instance of that name;
    a second run in the same second must still log into its own folder."""
    monkeypatch.setattr(mmengine_runner.time, 'strftime', lambda *args: '20260101_000000')
    runners = []
    for name in ('first', 'second'):
        cfg = Config.fromfile(TINY)
        cfg.work_dir = str(tmp_path / name)
        runner = IrtboxRunner.from_cfg(cfg)
        runner.logger.info(f'hello from {name}')
        runners.append(runner)
    assert runners[0].experiment_name != runners[1].experiment_name
    for name in ('first', 'second'):
        logs = glob.glob(str(tmp_path / name / '*' / '*.log'))
        assert len(logs) == 1, name
        with open(logs[0]) as f:
            assert f'hello from {name}' in f.read()
