"""Several kinds' quick rehearsals in one launcher session (``rehearse --all-kinds --quick
--kinds-per-session K``; issue 47 item 3): one process start for the batch, and a kind that
fails there fails alone. The sessions here are real (torchrun, 2 gloo ranks, the batch's own
rank-side code), their phases stand-ins: one collective each, the checkpoint record a test
phase reads."""
import concurrent.futures
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from irtbox.ops import rehearsal_kinds
from irtbox.ops import rehearse as rehearse_module
from irtbox.ops.rehearsal_kinds import ConfigKind, rehearse_kinds

KIND = ConfigKind('b', (), (), (), 's', 'l', '', 'w', ())

# What each rank runs instead of `irtbox rehearse --session PLAN`: the session itself, each
# phase a stand-in. FAIL: {config stem: [phase, 'before' / 'after' its collective]}, raised on
# rank 1 only.
RANK = '''
import json, os, sys
import torch, torch.distributed as dist
import irtbox.cli.rehearse as session
import irtbox.cli.test, irtbox.cli.train

failing = json.loads(os.environ['FAIL'])
session._PEERS_GRACE = 1.0  # the rank that failed leaves after 1 s, not 30


def phase(argv):
    if not dist.is_initialized():  # what the first runner does
        dist.init_process_group('gloo')
    here = os.environ['IRTBOX_REHEARSAL_PHASE']
    phase_name, when = failing.get(os.path.basename(argv[0])[:-3], [None, None])
    fails = phase_name == here and dist.get_rank() == 1
    if fails and when == 'before':  # rank 0 waits for it in the collective
        raise ValueError('forced before the collective')
    total = torch.ones(1)
    dist.all_reduce(total)
    assert total.item() == 2
    if fails:
        raise ValueError('forced on rank 1')
    if here != 'test':
        run = argv[argv.index('--work-dir') + 1]
        os.makedirs(run, exist_ok=True)
        with open(os.path.join(run, 'last_checkpoint'), 'w') as f:
            f.write(os.path.join(run, 'iter_1.pth'))


irtbox.cli.train.main = irtbox.cli.test.main = phase
session.main(sys.argv[1:])
'''


def _stand_ins(tmp_path, monkeypatch, fail):
    """The rehearsal's miniature and probe checks replaced: the phases' outcome alone is
    checked (as the real check does first); the launches counted."""
    script = tmp_path / 'rank.py'
    script.write_text(RANK)
    monkeypatch.setenv('FAIL', json.dumps(fail))
    monkeypatch.setenv('OMP_NUM_THREADS', '1')

    def prepare(config, folder, cfg_options=None, **miniature):
        os.makedirs(folder, exist_ok=True)
        return config, {}, []
    for module in (rehearsal_kinds, rehearse_module):
        monkeypatch.setattr(module, 'prepare_rehearsal', prepare)
    check = rehearse_module.check_rehearsal
    monkeypatch.setattr(rehearse_module, 'check_rehearsal', lambda report, timeout: [
        c for c in check(report, timeout) if c.name.startswith('phase')])
    monkeypatch.setattr(rehearse_module.commands, 'irtbox_command', lambda args: [
        sys.executable, '-m', 'torch.distributed.run', '--nproc-per-node=2',
        '--rdzv-backend=c10d', '--rdzv-endpoint=127.0.0.1:0', str(script),
        *args[args.index('--session'):][:2], '--launcher', 'pytorch'])  # less --nproc
    launches = []
    run_phase = rehearse_module._run_phase

    def counted(name, command, *args, **kwargs):
        launches.append(command)
        return run_phase(name, command, *args, **kwargs)
    monkeypatch.setattr(rehearse_module, '_run_phase', counted)
    return launches


@pytest.mark.slow
def test_a_batch_runs_in_one_session_and_a_failing_kind_fails_alone(tmp_path, monkeypatch):
    """Kind b: rank 1 raises after the resume phase's collective; the ranks agree that b
    failed and go on with c in the same session. Kind c: rank 1 raises before a collective
    that rank 0 waits in; it leaves the session after the grace, the session ends, and the
    kinds it had not finished (c, d) are rehearsed again one session each. Each failure names
    its kind and rank 1's error; a and d pass."""
    launches = _stand_ins(tmp_path, monkeypatch, dict(b=['resume', 'after'],
                                                      c=['train', 'before']))
    work = tmp_path / 'kinds'
    results = rehearse_kinds(str(work), [(KIND, f'{n}.py') for n in 'abcd'],
                             echo=lambda line: None, kinds_per_session=4, nproc=2,
                             timeout=120, one_session=True)
    assert [r.ok for r in results] == [True, False, False, True]
    assert len(launches) == 3  # the batch, then c and d alone; before: one session per kind
    log = work / 'b' / 'logs' / 'train+resume+test_rank1.log'
    assert results[1].report.first_failure.detail == (
        f'exit 1 (log: {log}: ValueError: forced on rank 1)')
    record = json.loads((work / 'b' / 'logs' / 'train+resume+test_rank0.json').read_text())
    assert record['error'] is None  # rank 0 stopped because rank 1 failed; its own error: none
    # Each kind's phases ran in order on each rank, b's test phase not at all.
    assert (work / 'a' / 'logs' / 'train+resume+test_rank0.log').read_text().count(
        'done in') == 3
    assert 'phase test' not in (work / 'b' / 'logs' / 'train+resume+test_rank0.log').read_text()
    # c, alone: torchrun names the rank (the quoted line can be a stdout line that torchrun
    # wrote after rank 1's traceback: the log holds the error)
    detail = results[2].report.first_failure.detail
    assert detail.startswith(f'exit 1 (log: {work / "c" / "logs" / "train+resume+test.log"}: '
                             'rank 1: ')
    assert 'ValueError: forced before the collective' in (
        work / 'c' / 'logs' / 'train+resume+test.log').read_text()


def test_kinds_per_session_mixes_the_kinds_and_leaves_no_job_idle(monkeypatch):
    """Up to K kinds a session, every n-th kind (a family's kinds, listed together, spread
    over the sessions), fewer where a job would get none; the results in the kinds' order."""
    batches = []
    monkeypatch.setattr(rehearsal_kinds, '_rehearse_batch', lambda tasks, plan, echo: (
        batches.append([t[2][0] for t in tasks]) or [t[2] for t in tasks]))
    configs = [(KIND, f'{n}.py') for n in 'abcde']
    for k in (8, 2):
        assert rehearse_kinds('w', configs, kinds_per_session=k, one_session=True) == [
            c for _, c in configs]
    rehearse_kinds('w', configs, kinds_per_session=8, one_session=False)

    class InThreads(ThreadPoolExecutor):  # the jobs' processes, as threads
        def __init__(self, jobs, mp_context=None):
            super().__init__(jobs)
    monkeypatch.setattr(concurrent.futures, 'ProcessPoolExecutor', InThreads)
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    rehearse_kinds('w', configs, jobs=2, kinds_per_session=8, one_session=True)
    assert batches == [list('abcde'), list('ad'), list('be'), list('c'), *map(list, 'abcde'),
                       list('ace'), list('bd')]


def test_a_rehearsal_leaves_the_process_state_as_it_found_it(monkeypatch):
    """What a rehearsal's runners set for the whole process (environment variables, cuDNN's
    benchmark, the default dtype) does not reach the next rehearsal of its session."""
    from irtbox.cli.rehearse import _process_state_kept
    monkeypatch.delenv('IRTBOX_REHEARSAL_PHASE', raising=False)
    monkeypatch.setenv('KEPT', 'before')
    before = torch.backends.cudnn.benchmark, torch.get_default_dtype()
    with _process_state_kept():
        os.environ['IRTBOX_REHEARSAL_PHASE'] = 'test'
        os.environ['KEPT'] = 'changed'
        torch.backends.cudnn.benchmark = not before[0]
        torch.set_default_dtype(torch.float64)
    assert 'IRTBOX_REHEARSAL_PHASE' not in os.environ and os.environ['KEPT'] == 'before'
    assert (torch.backends.cudnn.benchmark, torch.get_default_dtype()) == before
