"""Checkpoints never lose work: atomic saves, resume that falls back to the newest intact
checkpoint, strict loading, a clear refusal of files that are no checkpoint."""
import os
import re
import shutil
import signal

import pytest
import torch

from irtbox.apis import init_model
from irtbox.apis.inference import CheckpointMismatchError
from irtbox.utils.checkpoint import checkpoint_problem, safe_torch_load
from tests.forked_process import run_in_process
from tests.test_reliability.reliability_helpers import ROOT, TINY_CONFIG, run_log
from irtbox.cli import test as test_tool
from irtbox.cli import train as train_tool


def train(work_dir, *extra, iters=None):
    options = [f'train_cfg.max_iters={iters}'] if iters else []
    argv = [TINY_CONFIG, '--work-dir', str(work_dir), *extra]
    train_tool.main(argv + (['--cfg-options', *options] if options else []))


def ckpt_iter(path):
    return safe_torch_load(path)['meta']['iter']


@pytest.fixture(scope='module')
def four_iterations(tmp_path_factory):
    """A work dir after a 4-iteration run (iter_2.pth, iter_4.pth): trained once, copied."""
    work_dir = tmp_path_factory.mktemp('trained') / 'w'
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        train(work_dir, iters=4)
    return work_dir


def copy_run(source, tmp_path):
    """A copy of a work dir, its last_checkpoint pointing into the copy."""
    work_dir = tmp_path / 'w'
    shutil.copytree(source, work_dir)
    record = work_dir / 'last_checkpoint'
    record.write_text(record.read_text().replace(str(source), str(work_dir)))
    return work_dir


@pytest.fixture
def other_architecture(tmp_path):
    """A checkpoint of another architecture: one tensor of another shape, one key missing,
    one key the model does not have."""
    state = init_model(TINY_CONFIG).state_dict()
    key = 'backbone.model.blocks.0.mlp.fc1.weight'
    state[key] = torch.zeros(state[key].shape[0] + 1, state[key].shape[1])
    state.pop('backbone.model.norm.bias')
    state['backbone.model.extra_block.weight'] = torch.zeros(3)
    path = str(tmp_path / 'other.pth')
    torch.save({'state_dict': state, 'meta': dict(iter=2, epoch=0)}, path)
    return path


def assert_names_mismatch(err, path):
    message = str(err.value)
    assert path in message
    assert 'backbone.model.norm.bias' in message  # missing
    assert 'backbone.model.extra_block.weight' in message  # unexpected
    assert 'backbone.model.blocks.0.mlp.fc1.weight' in message  # shape


@pytest.mark.slow
def test_test_tool_refuses_another_architecture(other_architecture, tmp_path, in_root):
    # Before: the matching keys were loaded (none), the rest left random, exit 0.
    with pytest.raises(CheckpointMismatchError) as err:
        test_tool.main([TINY_CONFIG, other_architecture, '--work-dir', str(tmp_path / 'w')])
    assert_names_mismatch(err, other_architecture)


@pytest.mark.slow
def test_load_from_refused_unless_partial_load_asked(other_architecture, tmp_path, in_root):
    load = f'load_from={other_architecture}'
    with pytest.raises(CheckpointMismatchError) as err:
        train(tmp_path / 'strict', '--cfg-options', load, 'train_cfg.max_iters=1')
    assert_names_mismatch(err, other_architecture)
    train(tmp_path / 'partial', '--cfg-options', load, 'load_partial=True', 'train_cfg.max_iters=1')
    assert (tmp_path / 'partial' / 'iter_1.pth').is_file()


@pytest.mark.slow
def test_resume_refuses_another_architecture(other_architecture, tmp_path, in_root):
    with pytest.raises(CheckpointMismatchError) as err:
        train(tmp_path / 'w', '--resume', other_architecture)
    assert_names_mismatch(err, other_architecture)


@pytest.mark.slow
@pytest.mark.parametrize('content', ['random', 'empty', 'truncated'])
def test_not_a_checkpoint_names_the_file(content, tmp_path, in_root):
    path = str(tmp_path / 'model.pth')
    torch.save({'state_dict': init_model(TINY_CONFIG).state_dict()}, path)
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write({'random': os.urandom(4096), 'empty': b'',
                 'truncated': data[:len(data) // 2]}[content])
    expected = {'random': 'is not a PyTorch checkpoint', 'empty': 'empty file (0 bytes)',
                'truncated': 'truncated checkpoint'}[content]
    with pytest.raises(RuntimeError, match=re.escape(expected)) as err:
        test_tool.main([TINY_CONFIG, path, '--work-dir', str(tmp_path / 'w')])
    assert path in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize('record', ['missing', 'empty'])
def test_resume_without_last_checkpoint_uses_newest(record, four_iterations, tmp_path, in_root):
    work_dir = copy_run(four_iterations, tmp_path)
    earlier = {name: (work_dir / name).read_bytes() for name in ('iter_2.pth', 'iter_4.pth')}
    if record == 'missing':
        os.remove(work_dir / 'last_checkpoint')
    else:
        (work_dir / 'last_checkpoint').write_text('')
    train(work_dir, '--resume', iters=6)
    # Before: restarted at iteration 1 and overwrote iter_2.pth and iter_4.pth with a new run.
    assert {name: (work_dir / name).read_bytes() for name in earlier} == earlier
    assert ckpt_iter(str(work_dir / 'iter_6.pth')) == 6
    log = run_log(str(work_dir))
    assert f'last_checkpoint is {record}' in log and f'resume: from {work_dir}/iter_4.pth' in log


@pytest.mark.slow
def test_resume_with_no_checkpoint_says_so(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    train(work_dir, '--resume', iters=2)
    assert f'no checkpoint in {work_dir}: starting from iteration 0' in run_log(str(work_dir))


@pytest.mark.slow
@pytest.mark.parametrize('damage', ['truncated', 'zero_bytes', 'missing_target'])
def test_resume_skips_a_damaged_newest_checkpoint(damage, four_iterations, tmp_path, in_root):
    work_dir = copy_run(four_iterations, tmp_path)
    newest = work_dir / 'iter_4.pth'
    if damage == 'truncated':
        newest.write_bytes(newest.read_bytes()[:1000])
    elif damage == 'zero_bytes':
        newest.write_bytes(b'')
    else:
        (work_dir / 'last_checkpoint').write_text(str(work_dir / 'iter_6.pth'))
    train(work_dir, '--resume', iters=6)
    log = run_log(str(work_dir))
    skipped = 'iter_6.pth: file not found' if damage == 'missing_target' else 'iter_4.pth: '
    assert f'skipped {work_dir}/{skipped}' in log
    resumed_from = 'iter_4' if damage == 'missing_target' else 'iter_2'
    assert f'resume: from {work_dir}/{resumed_from}.pth' in log
    assert ckpt_iter(str(work_dir / 'iter_6.pth')) == 6


@pytest.mark.slow
def test_same_command_resumes_in_one_process(four_iterations, tmp_path, in_root):
    # Before: one process resumed only with --resume: after a SIGTERM ("the same command
    # resumes from it") the same command started from iteration 0 and its rotation deleted
    # the saved checkpoint.
    work_dir = copy_run(four_iterations, tmp_path)
    train(work_dir, iters=6)
    assert f'resume: from {work_dir}/iter_4.pth' in run_log(str(work_dir))
    assert ckpt_iter(str(work_dir / 'iter_6.pth')) == 6


@pytest.mark.slow
def test_fresh_run_warns_before_overwriting(four_iterations, tmp_path, in_root):
    work_dir = copy_run(four_iterations, tmp_path)
    train(work_dir, '--no-resume', iters=2)
    assert 'holds checkpoints of an earlier run (iter_4.pth, iter_2.pth)' in run_log(str(work_dir))


def train_killed_during_save(argv):
    """``irtbox train ARGV``, the process killed halfway through writing the bytes of the 2nd
    checkpoint."""
    from mmengine.fileio.backends import LocalBackend
    put = LocalBackend.put

    def put_then_die(self, obj, filepath):
        if 'iter_4' in str(filepath):
            with open(filepath, 'wb') as f:
                f.write(obj[:len(obj) // 2])
                f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return put(self, obj, filepath)

    LocalBackend.put = put_then_die
    train_tool.main(argv)


@pytest.mark.slow
def test_kill_during_checkpoint_save_then_resume(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    # max_keep_ckpts=1: before, MMEngine deleted iter_2.pth before writing iter_4.pth, so
    # the kill left no checkpoint and last_checkpoint named the deleted file.
    # A process of its own (forked from the forkserver, where the training's imports are done).
    code = run_in_process(train_killed_during_save, [[
        TINY_CONFIG, '--work-dir', str(work_dir), '--cfg-options',
        'default_hooks.checkpoint.max_keep_ckpts=1']], stderr=tmp_path / 'stderr')
    assert code == -9, (tmp_path / 'stderr').read_text()[-3000:]
    # Before: iter_4.pth was left truncated under its final name.
    for name in os.listdir(work_dir):
        if name.endswith('.pth') and not name.startswith('.'):  # '.<name>.*.tmp.pth': a part
            assert checkpoint_problem(str(work_dir / name)) is None, name
    assert not (work_dir / 'iter_4.pth').exists()
    assert checkpoint_problem(str(work_dir / 'iter_2.pth')) is None
    assert (work_dir / 'last_checkpoint').read_text() == str(work_dir / 'iter_2.pth')
    train(work_dir, '--resume', '--cfg-options', 'default_hooks.checkpoint.max_keep_ckpts=1')
    assert f'resume: from {work_dir}/iter_2.pth' in run_log(str(work_dir))
    assert ckpt_iter(str(work_dir / 'iter_4.pth')) == 4
    assert not (work_dir / 'iter_2.pth').exists()  # rotated once its successor was complete


@pytest.mark.slow
def test_failed_save_keeps_the_only_checkpoint(tmp_path, in_root, monkeypatch):
    # A full disk while iter_4.pth is written, with max_keep_ckpts=1 (the quick-start
    # configs'). Before: iter_2.pth was deleted first, then the save failed: no checkpoint,
    # last_checkpoint naming a missing file, and the message said nothing had changed.
    import errno

    from mmengine.fileio.backends import LocalBackend
    put = LocalBackend.put

    def full_disk(self, obj, filepath):
        if 'iter_4' in str(filepath):
            raise OSError(errno.ENOSPC, 'No space left on device')
        return put(self, obj, filepath)

    monkeypatch.setattr(LocalBackend, 'put', full_disk)
    work_dir = tmp_path / 'w'
    with pytest.raises(OSError, match='cannot write .*iter_4.pth'):
        train(work_dir, '--cfg-options', 'default_hooks.checkpoint.max_keep_ckpts=1')
    assert checkpoint_problem(str(work_dir / 'iter_2.pth')) is None
    assert (work_dir / 'last_checkpoint').read_text() == str(work_dir / 'iter_2.pth')
    assert [n for n in os.listdir(work_dir) if n.endswith('.pth')] == ['iter_2.pth']  # no part


@pytest.mark.slow
def test_a_kill_between_the_save_and_the_deletion_is_tidied_by_the_resumed_run(
        tmp_path, in_root, monkeypatch):
    from irtbox.engine.hooks import CheckpointHook

    class Killed(BaseException):
        pass

    def killed(self, path):
        raise Killed(path)

    monkeypatch.setattr(CheckpointHook, '_remove', killed)
    work_dir = tmp_path / 'w'
    options = ['--cfg-options', 'default_hooks.checkpoint.max_keep_ckpts=1']
    with pytest.raises(Killed):  # iter_4.pth and last_checkpoint written, iter_2.pth not gone
        train(work_dir, *options)
    assert (work_dir / 'last_checkpoint').read_text() == str(work_dir / 'iter_4.pth')
    assert (work_dir / 'iter_2.pth').exists()
    monkeypatch.undo()
    # The checkpoint records the step still to delete; the resumed run's before_train (the
    # hook's, MMEngine's trimming) deletes it, here without building a whole runner again.
    from mmengine.logging import MessageHub, MMLogger
    hub = MessageHub.get_instance('kill_between')
    hub.load_state_dict(safe_torch_load(str(work_dir / 'iter_4.pth'))['message_hub'])
    assert hub.get_info('keep_ckpt_ids') == [2, 4]

    class Resumed:
        message_hub, logger = hub, MMLogger.get_instance('kill_between')

    Resumed.work_dir = str(work_dir)
    CheckpointHook(interval=2, by_epoch=False, max_keep_ckpts=1).before_train(Resumed())
    assert sorted(n for n in os.listdir(work_dir) if n.endswith('.pth')) == ['iter_4.pth']


def test_best_checkpoint_replaced_only_after_the_new_one_is_written(tmp_path):
    # Before: MMEngine removed best_recall@1_iter_2.pth before writing the new best, so a
    # failed save left no best checkpoint.
    from mmengine.logging import MessageHub, MMLogger

    from irtbox.engine.hooks import CheckpointHook

    class Runner:
        work_dir, epoch, iter = str(tmp_path), 0, 2
        message_hub = MessageHub.get_instance('best_rotation')
        logger = MMLogger.get_instance('best_rotation')
        fail = False

        def save_checkpoint(self, out_dir, filename, **kwargs):
            if self.fail:
                raise OSError(28, f'No space left on device: cannot write {filename}')
            (tmp_path / filename).write_bytes(b'x')

    runner = Runner()
    hook = CheckpointHook(interval=2, by_epoch=False, save_best='recall@1', rule='greater')
    hook.before_train(runner)
    hook._save_best_checkpoint(runner, {'recall@1': 0.5})
    assert os.listdir(tmp_path) == ['best_recall@1_iter_2.pth']
    runner.iter, runner.fail = 4, True
    with pytest.raises(OSError):
        hook._save_best_checkpoint(runner, {'recall@1': 0.7})
    assert os.listdir(tmp_path) == ['best_recall@1_iter_2.pth']
    runner.fail = False
    hook.best_ckpt_path = str(tmp_path / 'best_recall@1_iter_2.pth')  # as resumed
    hook._save_best_checkpoint(runner, {'recall@1': 0.9})
    assert os.listdir(tmp_path) == ['best_recall@1_iter_4.pth']


@pytest.mark.slow
def test_clean_run_logs_no_unactionable_warning(tmp_path, in_root):
    work_dir = tmp_path / 'w'
    train(work_dir, iters=2)
    warnings = [line for line in run_log(str(work_dir)).splitlines() if ' - WARNING - ' in line
                # The visualizer registry scope is issue 12's (results pictures).
                and 'registry tree' not in line]
    # Before: MMEngine's FileClient / HardDiskBackend deprecations and the metric prefix note.
    assert warnings == []


@pytest.mark.slow
def test_training_only_parts_checked_by_purpose(tmp_path, in_root):
    """The head (classifier, memory) is not used to evaluate: a checkpoint without it, or with
    a classifier of another size, still tests; resuming needs it whole; load_from may lack it."""
    state = init_model(TINY_CONFIG).state_dict()
    head = [k for k in state if k.startswith('head.')]
    assert head
    path = str(tmp_path / 'no_head.pth')
    torch.save({'state_dict': {k: v for k, v in state.items() if k not in head},
                'meta': dict(iter=2, epoch=0)}, path)
    test_tool.main([TINY_CONFIG, path, '--work-dir', str(tmp_path / 'test')])
    train(tmp_path / 'finetune', '--cfg-options', f'load_from={path}', 'train_cfg.max_iters=1')
    with pytest.raises(CheckpointMismatchError, match=re.escape(head[0])):
        train(tmp_path / 'resume', '--resume', path)


def test_strip_prefixes_removes_wrappers_only_when_every_key_has_them():
    from irtbox.utils.checkpoint import strip_prefixes
    w = torch.zeros(1)
    assert strip_prefixes({'module.backbone.model.blocks.0.w': w}) == {'blocks.0.w': w}
    assert strip_prefixes({'backbone.w': w, 'model.v': w}) == {'backbone.w': w, 'model.v': w}
    assert strip_prefixes({'net.w': w}, prefixes=('net.',)) == {'w': w}
    assert strip_prefixes({}) == {}
