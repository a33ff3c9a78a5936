"""ResumeCheckHook and WorkDirLockHook on their own (the trainings that use them:
tests/test_reliability/test_resume_changes.py, test_work_dir_lock.py, test_cluster.py), and the
command line's wording of their refusals."""
import json
import logging
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper

from irtbox.cli.train import refusal_message
from irtbox.engine.hooks import ResumeCheckHook, ResumeRefused, WorkDirLockHook
from irtbox.engine.hooks.resume_check import training_differences, training_identity
from irtbox.engine.work_dir_lock import LOCK_NAME, WorkDirLocked

CFG = Config(dict(model=dict(type='M', depth=1)))


def runner_with(lr, resuming_from='ckpt.pth', **settings):
    """A runner as the hook sees it while resuming: the optimizer and its learning-rate
    schedule built from the config (initial_lr is the schedule's base)."""
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
    optimizer = torch.optim.AdamW([{'params': params[:1]}, {'params': params[1:], 'lr': lr / 10}],
                                  lr=lr, **settings)
    for group in optimizer.param_groups:
        group['initial_lr'] = group['lr']
    return SimpleNamespace(cfg=CFG, optim_wrapper=OptimWrapper(optimizer),
                           resuming_from=resuming_from, logger=logging.getLogger('test'))


def saved_by(runner, scheduled_lr):
    """The checkpoint of ``runner``'s training, its schedule at ``scheduled_lr`` of the base."""
    checkpoint = dict(meta={}, optimizer=runner.optim_wrapper.state_dict())
    ResumeCheckHook().before_save_checkpoint(runner, checkpoint)
    bases = [g['initial_lr'] for g in checkpoint['optimizer']['param_groups']]
    for group in checkpoint['optimizer']['param_groups']:
        group['lr'] = group['initial_lr'] * scheduled_lr
    checkpoint['param_schedulers'] = [dict(param_name='lr', base_values=list(bases),
                                           _last_value=[b * scheduled_lr for b in bases])]
    return checkpoint


def test_a_new_learning_rate_scales_the_saved_rates_and_schedule(caplog):
    checkpoint = saved_by(runner_with(1e-3), scheduled_lr=0.5)
    with caplog.at_level(logging.WARNING, logger='test'):
        ResumeCheckHook().after_load_checkpoint(runner_with(1e-2), checkpoint)
    groups = checkpoint['optimizer']['param_groups']
    assert [g['initial_lr'] for g in groups] == pytest.approx([1e-2, 1e-3])
    assert [g['lr'] for g in groups] == pytest.approx([5e-3, 5e-4])  # same point of the schedule
    schedule = checkpoint['param_schedulers'][0]
    assert schedule['base_values'] == pytest.approx([1e-2, 1e-3])
    assert schedule['_last_value'] == pytest.approx([5e-3, 5e-4])
    assert "the learning rate is 0.01 in the config, 0.001 in ckpt.pth" in caplog.text


def test_only_a_resume_is_checked():
    checkpoint = saved_by(runner_with(1e-3), scheduled_lr=1.0)
    other = runner_with(1e-2, resuming_from=None, amsgrad=True)  # a load_from: weights only
    other.cfg = Config(dict(model=dict(type='M', depth=2)))
    ResumeCheckHook().after_load_checkpoint(other, checkpoint)
    assert checkpoint['optimizer']['param_groups'][0]['lr'] == pytest.approx(1e-3)


def test_refusals_name_the_value_at_fault_and_no_command_line():
    checkpoint = saved_by(runner_with(1e-3), scheduled_lr=1.0)
    other = runner_with(1e-3)
    other.cfg = Config(dict(model=dict(type='M', depth=2)))
    with pytest.raises(ResumeRefused) as refused:
        ResumeCheckHook().after_load_checkpoint(other, checkpoint)
    err = refused.value
    assert err.checkpoint == 'ckpt.pth' and err.other_training
    assert 'model.depth: 1 in the checkpoint, 2 in this config' in err.problem
    assert '--' not in str(err) and 'load_from=ckpt.pth with resume=False' in str(err)
    assert refusal_message(err) == (
        f'resume from ckpt.pth: {err.problem}. Give this run another --work-dir, or --no-resume '
        'to start over in this one (its checkpoints of the same name are overwritten); to '
        'start from its weights: --cfg-options load_from=ckpt.pth --no-resume (loads the '
        'weights only).')
    with pytest.raises(ResumeRefused, match=r'optim_wrapper.optimizer.amsgrad \(False in the '
                       r'checkpoint, True in the config\)'):
        ResumeCheckHook().after_load_checkpoint(runner_with(1e-3, amsgrad=True), checkpoint)


def test_the_lock_is_held_while_training_only(tmp_path):
    runner = SimpleNamespace(work_dir=str(tmp_path), logger=logging.getLogger('test'), iter=0,
                             optim_wrapper=dict(type='OptimWrapper'))  # test(): not built
    hook = WorkDirLockHook()
    hook.before_run(runner)
    assert not (tmp_path / LOCK_NAME).exists()
    runner.optim_wrapper = OptimWrapper(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))],
                                                        lr=0.1))
    hook.before_run(runner)
    assert (tmp_path / LOCK_NAME).exists()
    with pytest.raises(WorkDirLocked) as refused:  # another training of this process
        WorkDirLockHook().before_run(runner)
    assert '--' not in str(refused.value)
    assert refusal_message(refused.value).endswith(
        f'Give this one another --work-dir, or wait for that one to end. (If it is over, '
        f'delete {tmp_path / LOCK_NAME}.)')
    hook.train_finally(runner)  # also when training raised
    assert not (tmp_path / LOCK_NAME).exists()


def test_identity_leaves_out_paths_and_the_schedule():
    cfg = dict(model=dict(type='ImageRetriever', backbone=dict(depth=1, init_cfg=dict(
        type='Pretrained', checkpoint='/a/w.pth')), neck=[dict(type='GeMPool', p=3.0)]),
        train_dataloader=dict(dataset=dict(type='SOPDataset', data_root='/a', split='train')),
        train_cfg=dict(max_iters=10))
    moved = json.loads(json.dumps(cfg))
    moved['model']['backbone']['init_cfg']['checkpoint'] = '/b/w.pth'
    moved['train_dataloader']['dataset']['data_root'] = '/b'
    moved['train_cfg']['max_iters'] = 20
    assert training_identity(cfg) == training_identity(moved)
    assert training_identity(cfg)['model.neck.0.p'] == '3.0'
    moved['model']['neck'][0]['p'] = 4.0
    moved['train_dataloader']['dataset']['type'] = 'CUBDataset'
    assert training_differences(training_identity(cfg), training_identity(moved)) == [
        'model.neck.0.p: 3.0 in the checkpoint, 4.0 in this config',
        "train_dataloader.dataset.type: 'SOPDataset' in the checkpoint, 'CUBDataset' in this "
        'config']
    assert training_differences(None, training_identity(cfg)) == []  # a checkpoint that records none


def test_a_killed_saves_temporaries_go_when_the_next_training_holds_the_lock(tmp_path, caplog):
    """Issue 48 item 5: the temporaries of saves killed mid-write (a full checkpoint each)
    stayed through every later run. The training that takes the lock removes them; a training
    refused the lock removes nothing (they may be the holder's saves in progress)."""
    left = [tmp_path / '.iter_7.pth.k2j4h5g6.tmp.pth',
            tmp_path / '.best_recall@1_iter_6.pth.a1b2c3d4.tmp.pth']
    for path in left:
        path.write_bytes(b'PK\x03\x04' + bytes(1000))
    kept = [tmp_path / 'iter_6.pth', tmp_path / '.notes.txt']
    for path in kept:
        path.write_bytes(b'x')
    runner = SimpleNamespace(work_dir=str(tmp_path), logger=logging.getLogger('test'), iter=0,
                             optim_wrapper=OptimWrapper(torch.optim.SGD(
                                 [torch.nn.Parameter(torch.zeros(1))], lr=0.1)))
    holder = WorkDirLockHook()
    with caplog.at_level(logging.INFO, logger='test'):
        holder.before_run(runner)
    assert not any(path.exists() for path in left) and all(path.exists() for path in kept)
    assert ('removed 2 checkpoint temporaries left by interrupted saves (2.0 kB): '
            '.best_recall@1_iter_6.pth.a1b2c3d4.tmp.pth, .iter_7.pth.k2j4h5g6.tmp.pth'
            ) in caplog.text
    in_progress = tmp_path / '.iter_8.pth.zzzzzzzz.tmp.pth'
    in_progress.write_bytes(b'PK')
    with pytest.raises(WorkDirLocked):
        WorkDirLockHook().before_run(runner)
    assert in_progress.exists()  # the holder's save in progress
    holder.train_finally(runner)


@pytest.mark.parametrize('saved, now, world, skipped', [
    # Issue 48 item 4: batch size 4 -> 8: 40 iterations trained 160 samples, 20 batches of 8.
    (dict(batch_size=4), dict(batch_size=8), 1, 20),
    # 2 processes -> 4 (an elastic restart): 40 x 4 x 2 = 320 samples, 20 batches of 4 x 4.
    (dict(batch_size=4, processes=2), dict(batch_size=4), 4, 20),
    # m 4 -> 2: an iteration trains as many samples; said, the same skip.
    (dict(batch_size=8, sampler=dict(m=4)), dict(batch_size=8, sampler=dict(m=2)), 1, 40),
    # 3 -> 2 processes of 4: 40 x 12 = 480 samples, 60 batches of 8.
    (dict(batch_size=4, processes=3), dict(batch_size=4), 2, 60),
])
def test_a_changed_batch_size_skips_the_samples_trained_and_says_so(saved, now, world, skipped,
                                                                    monkeypatch, caplog):
    """Before: no word, and MMEngine's "Advance dataloader 40 steps" skipped 40 batches of
    the new size (320 samples against the 160 trained)."""
    from irtbox.engine.hooks import resume_check
    monkeypatch.setattr(resume_check, 'get_world_size', lambda: saved.get('processes', 1))
    settings = resume_check.data_settings(Config(dict(train_dataloader=saved)))
    checkpoint = dict(meta=dict(data_settings=settings))
    monkeypatch.setattr(resume_check, 'get_world_size', lambda: world)
    loop = SimpleNamespace(dataloader_iterator=iter(range(1000)))
    runner = SimpleNamespace(cfg=Config(dict(train_dataloader=now)), optim_wrapper=None,
                             resuming_from='w/iter_40.pth', logger=logging.getLogger('test'),
                             train_loop=loop, iter=40)
    hook = ResumeCheckHook()
    hook.after_load_checkpoint(runner, checkpoint)
    runner.resuming_from = None
    with caplog.at_level(logging.WARNING, logger='test'):
        hook.before_train(runner)
    for _ in range(40):  # MMEngine's advance over the iterations trained
        next(loop.dataloader_iterator)
    assert next(loop.dataloader_iterator) == skipped
    lines = [r.getMessage() for r in caplog.records if 'what an iteration trains' in r.getMessage()]
    assert len(lines) == 1 and '\n' not in lines[0] and 'w/iter_40.pth' in lines[0]
    assert (f'resumes after {skipped} batches of the new size, not 40' in lines[0]) == \
        (skipped != 40)


def test_the_same_data_settings_say_nothing_and_skip_as_mmengine(monkeypatch, caplog):
    from irtbox.engine.hooks import resume_check
    cfg = Config(dict(train_dataloader=dict(batch_size=4)))
    checkpoint = dict(meta=dict(data_settings=resume_check.data_settings(cfg)))
    loop = SimpleNamespace(dataloader_iterator=iter(range(1000)))
    runner = SimpleNamespace(cfg=cfg, optim_wrapper=None, resuming_from='c.pth',
                             logger=logging.getLogger('test'), train_loop=loop, iter=40)
    hook = ResumeCheckHook()
    hook.after_load_checkpoint(runner, checkpoint)
    with caplog.at_level(logging.WARNING, logger='test'):
        hook.before_train(runner)
    assert not caplog.records and next(loop.dataloader_iterator) == 0
