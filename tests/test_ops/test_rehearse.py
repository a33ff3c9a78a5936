"""The rehearsal's checks, on probe records written by hand: each check fails exactly when
what it guards went wrong."""
import importlib
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch

from irtbox.ops.rehearse import (SESSION, PhaseResult, RehearsalReport, check_rehearsal,
                                 prepare_rehearsal)
from irtbox.utils.checkpoint import state_digest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def write_run(tmp_path, changes=None, nproc=2):
    """A finished 2-process rehearsal: checkpoints iter_2 / iter_4 on disk, and the probe
    records of a run where everything went right, then ``changes`` applied
    (``changes[(phase, rank)] = function(record)``)."""
    changes = changes or {}
    run = tmp_path / 'run'
    run.mkdir()
    states = {n: {'w': torch.full((2, ), float(n))} for n in (0, 2, 4)}
    for n in (2, 4):
        torch.save({'state_dict': states[n], 'meta': {'iter': n}}, run / f'iter_{n}.pth')
    digest = {n: state_digest(states[n]) for n in states}
    backbone = {n: f'backbone{n}' for n in states}

    def moment(n):
        return dict(iter=n, epoch=0, model=digest[n], backbone=backbone[n])

    base = {
        'train': dict(start=moment(0), end=moment(2), saved=[dict(iter=2, model=digest[2])],
                      val=[{'recall@1': 50.0}], test=[], worked={'PCAFitHook': True},
                      unfitted=[]),
        'resume': dict(start=moment(2), end=moment(4), saved=[dict(iter=4, model=digest[4])],
                       val=[{'recall@1': 60.0}], test=[], worked={'PCAFitHook': True},
                       unfitted=[]),
        'test': dict(start=None, end=None, saved=[], val=[], test=[{'recall@1': 61.0}],
                     worked={'PCAFitHook': True}, unfitted=[]),
    }
    (tmp_path / 'probe').mkdir()
    for phase, record in base.items():
        for rank in range(nproc):
            record = json.loads(json.dumps(record))
            if (phase, rank) in changes:
                changes[(phase, rank)](record)
            (tmp_path / 'probe' / f'{phase}_rank{rank}.json').write_text(json.dumps(record))
    report = RehearsalReport('c.py', str(tmp_path), nproc, [])
    report.phases = [PhaseResult(p, [], 1.0, 0, str(tmp_path / f'{p}.log'))
                     for p in ('train', 'resume', 'test')]
    return report


def failed(report):
    return {c.name: c.detail for c in check_rehearsal(report, timeout=60) if not c.ok}


def check_start_weights_off(monkeypatch):
    """The start-weights check builds the configured backbone: tested end to end elsewhere."""
    rehearse = importlib.import_module('irtbox.ops.rehearse')  # the module, not the function
    monkeypatch.setattr(rehearse, '_check_start_weights',
                        lambda report, train: rehearse.Check('started', True))


def test_a_run_where_everything_went_right_passes(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)
    assert failed(write_run(tmp_path)) == {}


def test_a_hung_phase_fails_and_stops_the_checks(tmp_path):
    report = write_run(tmp_path)
    (tmp_path / 'resume.log').write_text('Saving checkpoint at 2 iterations\n')
    report.phases[1].returncode = None
    problems = failed(report)
    assert list(problems) == ['phase resume']
    assert 'hung: no exit within 60 s' in problems['phase resume']
    assert 'Saving checkpoint at 2 iterations' in problems['phase resume']


def test_ranks_that_differ_fail(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)

    def drift(record):
        record['end']['model'] = 'another'
    problems = failed(write_run(tmp_path, {('train', 1): drift}))
    assert problems == {'every rank holds the same weights and buffers':
                        'ranks differ at: train end'}


def test_unchanged_weights_fail(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)

    def frozen(record):
        record['end']['backbone'] = record['start']['backbone']
    assert 'weights changed' in failed(write_run(tmp_path, {('train', 0): frozen}))


def test_a_checkpoint_that_is_not_the_saved_model_fails(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)
    report = write_run(tmp_path)
    torch.save({'state_dict': {'w': torch.zeros(2)}}, tmp_path / 'run' / 'iter_2.pth')
    assert 'iter_2.pth differ(s) from every model saved' in \
        failed(report)['the checkpoint round-trips']


def test_a_resume_from_other_weights_fails(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)

    def elsewhere(record):
        record['start']['model'] = 'random'
    problems = failed(write_run(tmp_path, {('resume', 1): elsewhere}))
    assert 'ranks [1]' in problems['the checkpoint round-trips']


def test_an_idle_hook_or_unfitted_projection_fails(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)

    def idle(record):
        record['worked'] = {'PCAFitHook': False, 'TupleMiningHook': False}
        record['unfitted'] = ['neck.1']
    changes = {(phase, 0): idle for phase in ('train', 'resume', 'test')}
    problem = failed(write_run(tmp_path, changes))['every hook did its work']
    assert 'PCAFitHook, TupleMiningHook' in problem and 'neck.1' in problem


def test_a_non_finite_metric_fails(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)

    def nan(record):
        record['test'] = [{'recall@1': 'nan'}]
    problem = failed(write_run(tmp_path, {('test', 0): nan}))['metrics are finite']
    assert problem == 'not finite: test:recall@1=nan'


def test_a_missing_probe_record_fails(tmp_path, monkeypatch):
    report = write_run(tmp_path)
    (tmp_path / 'probe' / 'resume_rank1.json').unlink()
    assert failed(report) == {'probe records': 'missing: resume rank 1'}


def test_rehearsal_keeps_out_of_a_folder_it_did_not_make(tmp_path):
    (tmp_path / 'precious.txt').write_text('keep me')
    with pytest.raises(FileExistsError, match='something else than a rehearsal'):
        prepare_rehearsal(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'),
                          str(tmp_path))
    assert (tmp_path / 'precious.txt').read_text() == 'keep me'


def test_the_rehearsal_config_registers_its_probe(tmp_path):
    """The probe lives in irtbox.ops, which the library never imports: each phase's process
    registers it through the rehearsal config's custom_imports."""
    path, _, _ = prepare_rehearsal(osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py'),
                                   str(tmp_path), input_size=0)
    code = ('import sys; from mmengine.config import Config; from irtbox.registry import HOOKS; '
            'cfg = Config.fromfile(sys.argv[1]); '
            "assert 'irtbox.ops.rehearsal_probe' in cfg.custom_imports['imports']; "
            "assert 'irtbox.ops.rehearsal_probe' in sys.modules; "
            "print(HOOKS.get('RehearsalProbeHook').__module__)")
    done = subprocess.run([sys.executable, '-c', code, path], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.stdout.strip() == 'irtbox.ops.rehearsal_probe', done.stderr[-2000:]


def test_ctrl_c_stops_the_phase_and_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    """Ctrl-C in a phase: its session is ended and the command prints one line naming the
    phase (before: a 27-line KeyboardInterrupt traceback)."""
    import os
    import signal
    import threading

    from irtbox.cli import rehearse as rehearse_tool
    from irtbox.ops import rehearse as rehearse_module
    log = str(tmp_path / 'train.log')
    # Ctrl-C as at a terminal: a test run started in the background (nohup, `cmd &` in a
    # script) inherits SIGINT ignored, and Python leaves it ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(rehearse_module.RehearsalInterrupted) as error:
            rehearse_module._run_phase('train', [sys.executable, '-c', 'import time; '
                                                 'time.sleep(60)'], log, timeout=120)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert error.value.phase == 'train' and isinstance(error.value, KeyboardInterrupt)
    monkeypatch.setattr(rehearse_module, 'rehearse', lambda *a, **k: (_ for _ in ()).throw(
        rehearse_module.RehearsalInterrupted('resume', log)))
    with pytest.raises(SystemExit) as stop:
        rehearse_tool.main(['configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py',
                            '--work-dir', str(tmp_path / 'w')])
    assert stop.value.code == 130
    assert capsys.readouterr().err.splitlines() == [
        'rehearse: configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py: interrupted during '
        f'the resume phase, which was stopped (its processes ended; its output: {log})']


def test_a_test_phase_that_never_ran_fails(tmp_path, monkeypatch):
    """No checkpoint left to test: the test phase does not start, and that is a failure (it
    passed before: only the phases that ran were checked)."""
    check_start_weights_off(monkeypatch)
    report = write_run(tmp_path)
    report.phases = report.phases[:2]
    assert failed(report) == {'phase test': f'not run: no checkpoint in {tmp_path / "run"}'}


def test_one_session_is_checked_as_its_three_phases(tmp_path, monkeypatch):
    check_start_weights_off(monkeypatch)
    report = write_run(tmp_path)
    report.phases = [PhaseResult(SESSION, [], 3.0, 0, str(tmp_path / 'session.log'))]
    assert failed(report) == {}
    (tmp_path / 'probe' / 'test_rank1.json').unlink()
    assert failed(report) == {'probe records': 'missing: test rank 1'}


def test_a_validation_without_a_checkpoint_there_fails(tmp_path, monkeypatch):
    """Issue 47 item 2 hides where no checkpoint falls on a validation iteration: the
    miniature's schedule must keep one there."""
    check_start_weights_off(monkeypatch)

    def validated_at(iteration):
        def change(record):
            record['val_iters'] = [iteration]
        return change
    aside = {(phase, 0): validated_at(3) for phase in ('train', 'resume')}
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    assert failed(write_run(tmp_path / 'a', aside)) == {
        'a checkpoint fell on a validation iteration':
        'validations at iterations [3], checkpoints at [2, 4]'}
    on = {(phase, 0): validated_at(4) for phase in ('train', 'resume')}
    assert failed(write_run(tmp_path / 'b', on)) == {}


def test_quick_runs_two_processes_in_one_session(tmp_path, monkeypatch):
    """--quick: 2 ranks (what they exchange is rehearsed: issue 47 item 1 passed on one), the
    phases in one launcher session; a plain rehearsal keeps a session per phase."""
    from irtbox.cli import rehearse as rehearse_tool
    from irtbox.ops import rehearse as rehearse_module
    seen = []

    def fake(config, work_dir, **options):
        seen.append(options)
        raise FileNotFoundError('stop here')
    monkeypatch.setattr(rehearse_module, 'rehearse', fake)
    for extra in (['--quick'], []):
        with pytest.raises(SystemExit):
            rehearse_tool.main(['c.py', '--work-dir', str(tmp_path)] + extra)
    assert [(o['nproc'], o['one_session'], o['shallow']) for o in seen] == [
        (2, True, True), (2, False, False)]


def test_a_session_runs_each_phase_in_this_process_in_order(tmp_path, monkeypatch):
    """Each rank of a one-session rehearsal runs the commands of the plan in order, each
    phase named for the probe, the test phase on the checkpoint the resume saved last."""
    from irtbox.cli import rehearse as rehearse_tool
    from irtbox.ops import commands
    calls = []

    def command(name):
        def main(argv):
            calls.append((name, os.environ['IRTBOX_REHEARSAL_PHASE'], argv))
            if argv[-3:] == ['--resume', '--launcher', 'none']:
                (tmp_path / 'run' / 'last_checkpoint').write_text(str(tmp_path / 'c.pth\n'))
        return main
    for name in ('train', 'test'):
        monkeypatch.setattr(importlib.import_module(f'irtbox.cli.{name}'), 'main', command(name))
    monkeypatch.delenv('IRTBOX_REHEARSAL_PHASE', raising=False)
    (tmp_path / 'run').mkdir()
    plan = tmp_path / 'session.json'
    plan.write_text(json.dumps(commands.rehearsal_phases('r.py', str(tmp_path / 'run'),
                                                         {'train_cfg.max_iters': '1'},
                                                         str(tmp_path / 'test'))))
    rehearse_tool.main(['--session', str(plan)])
    run, test = str(tmp_path / 'run'), str(tmp_path / 'test')
    assert calls == [
        ('train', 'train', ['r.py', '--work-dir', run, '--cfg-options', 'train_cfg.max_iters=1',
                            '--launcher', 'none']),
        ('train', 'resume', ['r.py', '--work-dir', run, '--resume', '--launcher', 'none']),
        ('test', 'test', ['r.py', str(tmp_path / 'c.pth'), '--work-dir', test,
                          '--launcher', 'none'])]
