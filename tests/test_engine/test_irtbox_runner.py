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


def test_best_checkpoint_records_the_iterations_done(tmp_path):
    """A checkpoint saved after validation (save_best) records the iterations done: MMEngine
    counted one more (``iter + 1`` is right only inside after_train_iter)."""
    from irtbox.utils import safe_torch_load
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    cfg.train_cfg.val_interval = 2
    cfg.default_hooks.checkpoint.update(save_best='recall@1', rule='greater')
    IrtboxRunner.from_cfg(cfg).train()
    best = glob.glob(str(tmp_path / 'best_*.pth'))
    assert len(best) == 1
    done = int(osp.splitext(best[0])[0].rsplit('_', 1)[1])
    assert safe_torch_load(best[0])['meta']['iter'] == done
    assert safe_torch_load(str(tmp_path / 'iter_2.pth'))['meta']['iter'] == 2


def test_checkpoints_are_prepared_on_every_rank(tmp_path, monkeypatch):
    """prepare_checkpoint (collectives: the projection fits) runs on every rank; only rank 0
    writes the file."""
    import irtbox.engine.runner as runner_module
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    runner = IrtboxRunner.from_cfg(cfg)
    prepared = []

    class Preparing:
        priority = 50

        def prepare_checkpoint(self, runner):
            prepared.append(runner)

    runner._hooks.append(Preparing())
    monkeypatch.setattr(runner_module, 'is_main_process', lambda: False)
    runner.save_checkpoint(str(tmp_path), 'iter_1.pth')
    assert prepared == [runner] and not osp.exists(tmp_path / 'iter_1.pth')


def test_irtbox_default_hooks_can_be_dropped(tmp_path):
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path)
    cfg.default_hooks.update(non_finite_loss=None, sync_norm_stats=None)
    names = [type(h).__name__ for h in IrtboxRunner.from_cfg(cfg).hooks]
    assert 'NonFiniteLossHook' not in names and 'SyncNormStatsHook' not in names
    cfg.default_hooks.update(non_finite_loss=dict(max_skipped=2), sync_norm_stats={})
    cfg.work_dir = str(tmp_path / 'again')
    names = [type(h).__name__ for h in IrtboxRunner.from_cfg(cfg).hooks]
    assert 'NonFiniteLossHook' in names and 'SyncNormStatsHook' in names


def test_the_model_carries_the_input_spec_init_model_gives_it(tmp_path):
    """The runner's model has the input spec of the same config built by init_model, so a
    results file identifies the model as an index built from it would; a config without a test
    pipeline gives a model without one."""
    from irtbox.apis import init_model
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path / 'with')
    model = IrtboxRunner.from_cfg(cfg).model
    assert model.input_spec == init_model(TINY).input_spec
    assert model.input_spec.size == tuple(model.input_spec.size) and model.input_spec.pipeline
    cfg = Config.fromfile(TINY)
    cfg.work_dir = str(tmp_path / 'without')
    for key in ('test_dataloader', 'test_evaluator', 'test_cfg'):
        cfg[key] = None
    assert IrtboxRunner.from_cfg(cfg).model.input_spec is None
