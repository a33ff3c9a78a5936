"""GradientNoiseHook: γ of L_contr measured in real training steps, without changing them."""
import json
import os
import glob
import os.path as osp
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from irtbox.engine.runner import IrtboxRunner

from irtbox.engine.hooks import GradientNoiseHook
from irtbox.models.heads import EmbeddingHead
from irtbox.models.losses.contrastive import contrastive_loss
from irtbox.utils.checkpoint import register_safe_globals, safe_torch_load
from irtbox.utils.config import load_config

from tests.shared_runs import forked_ranks

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
TINY = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
KEY = 'train/gradient_gamma'


def reference_gamma(grads):
    """Drop zero rows, normalise, np.cov (unbiased), sum of singular values."""
    g = np.asarray(grads, dtype=np.float64)
    g = g[np.linalg.norm(g, axis=1) > 0]
    d = g / np.linalg.norm(g, axis=1, keepdims=True)
    return np.linalg.svd(np.cov(d, rowvar=False), compute_uv=False).sum()


class ReferenceGamma(Hook):
    """Before each step, γ from the gradient of Eq. 1 (the pure ``contrastive_loss``, batch
    and memory as the step sees them) with respect to the batch's embeddings as a leaf;
    after the step, what GradientNoiseHook logged (LOWEST: after it, in both places)."""

    priority = 'LOWEST'

    def __init__(self):
        self.expected, self.logged = [], []

    @staticmethod
    def _count(runner):
        scalars = runner.message_hub.log_scalars
        return len(scalars[KEY].data[0]) if KEY in scalars else 0

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        model = runner.model
        data = model.data_preprocessor(data_batch, True)
        labels = torch.stack([s.gt_label for s in data['data_samples']])
        with torch.no_grad():
            z = model._embed(data['inputs'], model.backbone, model.neck)
        z.requires_grad_()
        loss = model.head.losses['contrastive']
        mem_z, mem_labels = loss.memory.get()
        contrastive_loss(z, labels, loss.margin, mem_z, mem_labels).backward()
        self.expected.append(reference_gamma(z.grad.numpy()))
        self._before = self._count(runner)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        measured = self._count(runner) > self._before
        self.logged.append(runner.message_hub.get_scalar(KEY).current() if measured else None)


def train(work_dir, hooks=(), resume_from=None, **cfg_options):
    """Train the tiny config (its data paths are relative to the repository root)."""
    register_safe_globals()
    cfg = Config.fromfile(TINY)
    cfg.merge_from_dict(cfg_options)
    cfg.work_dir = str(work_dir)
    if resume_from:
        cfg.resume, cfg.load_from = True, resume_from
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        # irtbox's runner, as tools/train.py builds it: its logger and visualizer are never
        # those of an earlier run of this process started in the same second.
        runner = IrtboxRunner.from_cfg(cfg)
        for hook in hooks:
            runner.register_hook(hook)
        runner.train()
    finally:
        os.chdir(cwd)
    return runner


def read_json(work_dir):
    with open(osp.join(str(work_dir), 'gradient_noise.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def measured_run(tmp_path_factory):
    """4 iterations (memory of 12 = 3 batches, so the last steps read it), γ every 2."""
    work_dir = tmp_path_factory.mktemp('measured')
    reference = ReferenceGamma()
    runner = train(work_dir, [GradientNoiseHook(interval=2), reference])
    return work_dir, reference, runner


@pytest.mark.slow
def test_gamma_is_that_of_the_step(measured_run):
    work_dir, reference, runner = measured_run
    assert [v is not None for v in reference.logged] == [False, True, False, True]
    for expected, logged in zip(reference.expected, reference.logged):
        if logged is not None:
            assert logged == pytest.approx(expected, rel=1e-5)
    measured = [e for e, v in zip(reference.expected, reference.logged) if v is not None]
    result = read_json(work_dir)
    assert result['loss'] == 'contrastive' and result['interval'] == 2
    assert result['num_iterations'] == 2 and result['num_undefined'] == 0
    assert result['gamma_mean'] == pytest.approx(np.mean(measured), rel=1e-5)
    # The forward hook is gone after training.
    assert not runner.model.head.losses['contrastive']._forward_hooks


@pytest.mark.slow
def test_gamma_in_log_scalars(measured_run):
    work_dir, reference, _ = measured_run
    [path] = [osp.join(root, f) for root, _, files in os.walk(str(work_dir))
              for f in files if f == 'scalars.json']
    with open(path) as f:
        logged = [json.loads(line) for line in f]
    at_4 = [r for r in logged if r.get('iter') == 4 and 'gradient_gamma' in r]
    assert at_4 and at_4[0]['gradient_gamma'] == pytest.approx(reference.logged[3])


@pytest.mark.slow
def test_training_is_unchanged(tmp_path):
    with_hook = tmp_path / 'with'
    train(with_hook, custom_hooks=[dict(type='GradientNoiseHook')])
    train(tmp_path / 'without')
    a = safe_torch_load(osp.join(str(with_hook), 'iter_4.pth'))['state_dict']
    b = safe_torch_load(osp.join(str(tmp_path / 'without'), 'iter_4.pth'))['state_dict']
    assert a.keys() == b.keys()
    assert any('memory.embeddings' in k for k in a)  # the cross-batch memory is compared too
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert read_json(with_hook)['num_iterations'] == 4


@pytest.mark.slow
def test_resumed_run_averages_over_the_whole_training(measured_run, tmp_path):
    work_dir, reference, _ = measured_run
    resumed = tmp_path / 'resumed'
    resumed.mkdir()
    shutil.copy(osp.join(str(work_dir), 'iter_2.pth'), str(resumed))
    train(resumed, [GradientNoiseHook(interval=2)], resume_from=str(resumed / 'iter_2.pth'))
    straight, again = read_json(work_dir), read_json(resumed)
    assert again['num_iterations'] == straight['num_iterations'] == 2
    assert again['gamma_mean'] == pytest.approx(straight['gamma_mean'], rel=1e-5)


@pytest.mark.slow
def test_ddp_two_processes(tiny_ddp_run, tmp_path):
    """Under DDP (2 CPU processes, gloo) the weights are those of a run without the hook (the
    session's plain 2-process run of the same config)."""
    config = tmp_path / 'tiny_gamma.py'
    config.write_text(f"_base_ = ['{TINY}']\ncustom_hooks = [dict(type='GradientNoiseHook')]\n")
    # Its ranks forked from a fork server (what they compute is tested, not the launcher).
    forked_ranks('train', config, '--work-dir', tmp_path / 'with')
    without, _ = tiny_ddp_run
    a, b = (safe_torch_load(osp.join(d, 'iter_4.pth'))['state_dict']
            for d in (str(tmp_path / 'with'), without))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    result = read_json(tmp_path / 'with')
    # 2 ranks x 4 images gathered: γ <= n / (n - 1) for n directions.
    assert result['num_iterations'] == 4 and 0 < result['gamma_mean'] <= 8 / 7


@pytest.mark.slow
def test_table5_grid_measures_gamma():
    """Every β x λ run of Table 5 writes the data of Fig. 4, measuring a loss it computes."""
    paths = sorted(glob.glob(osp.join(ROOT, 'configs', 'irt', 'table5', '*.py')))
    assert len(paths) == 50
    for path in paths:
        cfg = load_config(path)
        hooks = [h for h in cfg.custom_hooks if h['type'] == 'GradientNoiseHook']
        assert len(hooks) == 1, path
        name = hooks[0].get('loss_name', 'contrastive')
        assert cfg.model.head.losses[name]['type'] == 'ContrastiveLoss', path
        assert (cfg.model.head.get('loss_weights') or {}).get(name, 1) != 0, path


def fake_runner(head):
    return SimpleNamespace(model=SimpleNamespace(head=head))


def test_unknown_loss_name_lists_the_losses():
    head = EmbeddingHead(dict(contrastive=dict(type='ContrastiveLoss'),
                              koleo=dict(type='KoLeoLoss')))
    with pytest.raises(KeyError, match=r"loss_name='snca'.*\['contrastive', 'koleo'\]"):
        GradientNoiseHook(loss_name='snca').before_train(fake_runner(head))


def test_zero_weight_loss_is_refused():
    head = EmbeddingHead(dict(contrastive=dict(type='ContrastiveLoss'),
                              koleo=dict(type='KoLeoLoss')), loss_weights=dict(contrastive=0))
    with pytest.raises(ValueError, match='loss_weights.contrastive is 0'):
        GradientNoiseHook().before_train(fake_runner(head))


def test_model_without_head_losses():
    with pytest.raises(TypeError, match='needs a head with named losses'):
        GradientNoiseHook().before_train(fake_runner(None))


@pytest.mark.parametrize('kwargs,match', [
    (dict(interval=0), 'interval must be a positive integer'),
    (dict(interval=True), 'interval must be a positive integer'),
    (dict(loss_name=''), 'loss_name must be')])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GradientNoiseHook(**kwargs)
