"""A resume that changes the learning rate or the optimizer type says what it does: the
config's new learning rate is used with a warning naming both; another optimizer type is
refused in one line before any state is loaded."""
import shutil

import pytest

from irtbox.cli import train as train_tool
from irtbox.utils.checkpoint import safe_torch_load
from tests.test_reliability.reliability_helpers import ROOT, TINY_CONFIG, run_log


def train(work_dir, *options, resume=False):
    argv = [TINY_CONFIG, '--work-dir', str(work_dir)] + (['--resume'] if resume else [])
    train_tool.main(argv + ['--cfg-options', *options])


@pytest.fixture(scope='module')
def two_iterations(tmp_path_factory):
    """A work dir after 2 iterations of AdamW at lr 1e-3 (iter_2.pth)."""
    work_dir = tmp_path_factory.mktemp('trained') / 'w'
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        train(work_dir, 'train_cfg.max_iters=2')
    return work_dir


@pytest.fixture
def run_copy(two_iterations, tmp_path):
    work_dir = tmp_path / 'w'
    shutil.copytree(two_iterations, work_dir)
    (work_dir / 'last_checkpoint').unlink()  # resume picks the newest iter_*.pth of the copy
    return work_dir


@pytest.mark.slow
def test_resume_with_a_new_learning_rate_uses_it(run_copy, in_root):
    train(run_copy, 'train_cfg.max_iters=4', 'optim_wrapper.optimizer.lr=0.01', resume=True)
    # Before: trained on at the checkpoint's 1e-3, no word about it.
    assert ("resume: the learning rate is 0.01 in the config, 0.001 in "
            f"{run_copy}/iter_2.pth: training goes on at the config's 0.01") in run_log(run_copy)
    groups = safe_torch_load(str(run_copy / 'iter_4.pth'))['optimizer']['param_groups']
    assert all(group['lr'] == pytest.approx(0.01) for group in groups)


@pytest.mark.slow
def test_resume_with_the_same_learning_rate_says_nothing(run_copy, in_root):
    train(run_copy, 'train_cfg.max_iters=4', resume=True)
    assert 'resume: the learning rate' not in run_log(run_copy)
    assert 'resume: the config changes optimizer settings' not in run_log(run_copy)


@pytest.mark.slow
def test_resume_with_new_optimizer_settings_uses_them(run_copy, in_root):
    # Before: the checkpoint's weight decay (5e-4), betas and eps were kept, no word said.
    train(run_copy, 'train_cfg.max_iters=4', 'optim_wrapper.optimizer.weight_decay=0.3',
          'optim_wrapper.optimizer.betas=[0.8,0.99]', 'optim_wrapper.optimizer.eps=1e-6',
          resume=True)
    assert (f'resume: the config changes optimizer settings of {run_copy}/iter_2.pth: '
            "training goes on with the config's betas [0.8, 0.99] (checkpoint: [0.9, 0.999]), "
            "eps 1e-06 (checkpoint: 1e-08), weight_decay 0.3 (checkpoint: 0.0005)"
            ) in run_log(run_copy)
    groups = safe_torch_load(str(run_copy / 'iter_4.pth'))['optimizer']['param_groups']
    assert all(g['weight_decay'] == 0.3 and list(g['betas']) == [0.8, 0.99] and g['eps'] == 1e-6
               for g in groups)


@pytest.mark.slow
def test_resume_with_a_setting_the_state_cannot_follow_is_refused(run_copy, in_root):
    # AMSGrad keeps a running maximum that an AdamW state without it does not have.
    with pytest.raises(SystemExit) as err:
        train(run_copy, 'train_cfg.max_iters=4', 'optim_wrapper.optimizer.amsgrad=True',
              resume=True)
    assert 'the config changes optim_wrapper.optimizer.amsgrad (False in the checkpoint, ' \
        'True in the config)' in str(err.value)
    assert not (run_copy / 'iter_4.pth').exists()


@pytest.mark.slow
def test_resume_into_another_optimizer_type_is_refused(run_copy, in_root):
    checkpoint = run_copy / 'iter_2.pth'
    # Before: "resumed", then KeyError: 'momentum' deep in torch's SGD.
    with pytest.raises(SystemExit) as err:
        train(run_copy, 'train_cfg.max_iters=4', 'optim_wrapper.optimizer.type=SGD', resume=True)
    assert str(err.value) == (
        f'{TINY_CONFIG}: resume from {checkpoint}: its optimizer is AdamW, the config asks for '
        "SGD; AdamW's state cannot continue as SGD's. To start from its weights: "
        f'--cfg-options load_from={checkpoint} --no-resume (loads the weights only).')
    assert not (run_copy / 'iter_4.pth').exists()


@pytest.mark.slow
def test_resume_with_another_batch_size_says_so_and_skips_the_samples_trained(run_copy, in_root):
    """Issue 48 item 4: batch size 4 -> 8 on resume went unsaid, and the data resumed after 2
    batches of 8 (16 samples against the 8 trained)."""
    train(run_copy, 'train_cfg.max_iters=3', 'train_dataloader.batch_size=8',
          'train_dataloader.sampler.batch_size=8', resume=True)
    log = run_log(run_copy)
    assert (f"resume: the config changes what an iteration trains in {run_copy}/iter_2.pth: "
            "training goes on with the config's train_dataloader.batch_size 8 (checkpoint: 4); "
            'the 2 iterations trained 8 samples, so the data resumes after 1 batches of the new '
            'size, not 2. The schedule stays in iterations.') in log
    assert (run_copy / 'iter_3.pth').exists()
