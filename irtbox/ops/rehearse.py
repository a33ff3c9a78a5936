"""Rehearse a config: run it in miniature the way a real run goes, then check what a real
run gets wrong before it has cost days.

A rehearsal runs the config's own model and hooks (:func:`~irtbox.ops.miniaturize.miniaturize`)
through the commands users run (:mod:`irtbox.ops.commands`), on ``nproc`` processes, in three
phases, each under a time limit: ``train`` (the first half of a
two-part schedule, ending in a checkpoint), ``resume`` (the same training resumed, to the
end) and ``test`` (on the last checkpoint). Every rank records what it saw
(:class:`~irtbox.ops.rehearsal_probe.RehearsalProbeHook`); :func:`check_rehearsal` then checks:

1. every phase ended with status 0 within its time limit (else it hung or failed);
2. training started from the expected backbone weights on every rank;
3. the backbone's weights changed during training;
4. every rank held the same weights and buffers at the start and end of each phase;
5. the checkpoint on disk equals the model that was saved, and the resumed run started
   from exactly it;
6. every hook did its work (fit hooks, mining, validation, early stopping, checkpoints):
   not only its set-up stages; no fitted projection left unfitted;
7. every validation and test metric is a finite number;
8. a checkpoint fell on a validation iteration (where the config validates): what is saved
   there must be what an uninterrupted run holds after that validation.

``one_session``: the three phases in one launcher session instead of one each (every rank runs
them one after the other, each phase a fresh runner): a process start per rehearsal rather than
per phase, which is most of a quick rehearsal's time. :func:`rehearse_batch` runs several
prepared rehearsals in one session (every rank runs each one's phases, its output in a log of
its own; an error on any rank ends that rehearsal only): one process start for the batch."""
import contextlib
import json
import os
import os.path as osp
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from irtbox.apis.model_zoo import resolve_config
from irtbox.engine.runner import run_checkpoints
from irtbox.models.backbones import offline_hub
from irtbox.registry import MODELS
from irtbox.utils.checkpoint import safe_torch_load, state_digest
from irtbox.utils.config import load_config
from irtbox.utils.dist import free_port
from irtbox.utils.errors import IrtboxError
from irtbox.utils.exit_status import EXIT_WITH_PARENT_VAR
from irtbox.utils.fileio import atomic_write, atomic_write_text, read_json
from . import commands
from .miniaturize import miniaturize

__all__ = ['Check', 'PhaseResult', 'RehearsalReport', 'RehearsalDirError',
           'RehearsalInterrupted', 'rehearse', 'rehearse_batch', 'check_rehearsal',
           'prepare_rehearsal', 'member_log', 'member_record']

PHASES = ('train', 'resume', 'test')
SESSION = '+'.join(PHASES)  # the name of the one phase of a one-session rehearsal
_MARKER = 'rehearsal.json'
_PROBE_MODULE = 'irtbox.ops.rehearsal_probe'


class RehearsalDirError(IrtboxError, FileExistsError):
    """The work dir holds files of something else than a rehearsal."""


class RehearsalInterrupted(IrtboxError, KeyboardInterrupt):
    """Ctrl-C during the phase ``phase``, which was stopped (its log: ``log_path``)."""

    def __init__(self, phase: str, log_path: str):
        super().__init__(f'interrupted during the {phase} phase, which was stopped (its '
                         f'processes ended; its output: {log_path})')
        self.phase, self.log_path = phase, log_path


@dataclass
class Check:
    """One check of a rehearsal: its name, whether it passed, and what was seen."""
    name: str
    ok: bool
    detail: str = ''


@dataclass
class PhaseResult:
    name: str
    command: List[str]
    seconds: float
    returncode: Optional[int]  # None: killed at the time limit
    log: str

    @property
    def status(self) -> str:
        return 'timed out' if self.returncode is None else f'exit {self.returncode}'


@dataclass
class RehearsalReport:
    config: str
    work_dir: str
    nproc: int
    notes: List[str]
    phases: List[PhaseResult] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def first_failure(self) -> Optional[Check]:
        return next((c for c in self.checks if not c.ok), None)

    def table(self) -> str:
        width = max([8] + [len(p.name) for p in self.phases])
        lines = [f'{"phase":<{width}} {"seconds":>8}  status']
        lines += [f'{p.name:<{width}} {p.seconds:>8.1f}  {p.status}' for p in self.phases]
        lines.append('')
        lines += [f'[{"PASS" if c.ok else "FAIL"}] {c.name}' + (f': {c.detail}' if c.detail
                                                              else '') for c in self.checks]
        return '\n'.join(lines)


def prepare_rehearsal(config: str, work_dir: str, cfg_options: Optional[dict] = None,
                      **miniature) -> tuple:
    """Write the miniature of ``config`` (config file, data, weights) into a fresh
    ``work_dir`` (a non-empty one only when an earlier rehearsal made it). Returns (config
    path, the first phase's config options, notes)."""
    if osp.isdir(work_dir) and os.listdir(work_dir):
        if not osp.exists(osp.join(work_dir, _MARKER)):
            raise RehearsalDirError(f'{work_dir} holds files of something else than '
                                    'a rehearsal; give another work_dir.', argument='work_dir')
        shutil.rmtree(work_dir)
    os.makedirs(work_dir, exist_ok=True)  # an empty folder is taken as it is
    atomic_write_text(osp.join(work_dir, _MARKER), json.dumps(dict(config=config)))
    cfg = load_config(resolve_config(config), cfg_options)
    cfg, first, notes = miniaturize(cfg, work_dir, **miniature)
    cfg.custom_hooks = list(cfg.get('custom_hooks') or []) + [
        dict(type='RehearsalProbeHook', out_dir=osp.join(work_dir, 'probe'))]
    # Every phase's process registers the probe through the config itself.
    imports = dict(cfg.get('custom_imports') or {})
    listed = imports.get('imports') or []
    imports['imports'] = [*([listed] if isinstance(listed, str) else listed), _PROBE_MODULE]
    cfg.custom_imports = imports
    path = osp.join(work_dir, 'rehearsal_config.py')
    atomic_write(path, cfg.dump)
    return path, first, notes


def _end_session(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM to the phase's session (the launcher and every rank: a training saves and
    stops), SIGKILL after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def member_log(work_dir: str, rank: int) -> str:
    """Where rank ``rank`` of a batch session writes its output while it rehearses the
    rehearsal of ``work_dir`` (:func:`rehearse_batch`)."""
    return osp.join(work_dir, 'logs', f'{SESSION}_rank{rank}.log')


def member_record(work_dir: str, rank: int) -> str:
    """Where rank ``rank`` of a batch session records how the rehearsal of ``work_dir`` ended
    on it: ``seconds``, ``status`` (the exit status its commands would have had) and ``error``
    (``Type: message``, or None)."""
    return osp.join(work_dir, 'logs', f'{SESSION}_rank{rank}.json')


def _run_phase(name: str, command: List[str], log_path: str, timeout: float,
               progress: Optional[Callable[[], int]] = None) -> PhaseResult:
    """Run ``command`` in a session of its own, killed (with every process of it) after
    ``timeout`` seconds; with ``progress``, ``timeout`` seconds after ``progress()`` last
    changed (a batch session: each rehearsal of it gets ``timeout``)."""
    env = dict(os.environ, IRTBOX_REHEARSAL_PHASE=name, PORT=str(free_port()),
               HF_HUB_OFFLINE='1',  # a rehearsal never downloads: weights are cached or stand-ins
               **{EXIT_WITH_PARENT_VAR: '1'},  # a rehearsal killed takes its phase along
               # torchrun: every rank's lines prefixed "[default<local rank>]:", so that a
               # failure can quote the failing rank's own exception (_failure_cause)
               PET_TEE='3', PET_LOG_DIR=osp.join(osp.dirname(log_path), f'{name}_ranks'))
    start = time.monotonic()
    with open(log_path, 'w') as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        deadline, seen = start + timeout, progress and progress()
        try:
            while True:
                try:
                    returncode = proc.wait(timeout=max(0.0, min(
                        deadline - time.monotonic(), 1.0 if progress else timeout)))
                    break
                except subprocess.TimeoutExpired:
                    if progress and progress() != seen:
                        deadline, seen = time.monotonic() + timeout, progress()
                    elif time.monotonic() >= deadline:
                        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and every rank
                        proc.wait()
                        returncode = None
                        break
        except BaseException as err:  # Ctrl-C: the phase has its own session: ended here
            _end_session(proc)
            if isinstance(err, KeyboardInterrupt):
                raise RehearsalInterrupted(name, log_path) from None
            raise
    return PhaseResult(name, command, time.monotonic() - start, returncode, log_path)


def rehearse(config: str, work_dir: str, nproc: int = 2, timeout: float = 600,
             cfg_options: Optional[dict] = None, echo=print, one_session: bool = False,
             **miniature) -> RehearsalReport:
    """Rehearse ``config`` in ``work_dir`` (see the module doc) on ``nproc`` processes,
    ``timeout`` seconds at most per phase (``one_session``: for the three phases' session);
    ``miniature``: the arguments of :func:`~irtbox.ops.miniaturize.miniaturize`. The report
    also goes to ``rehearsal.json``."""
    path, first, notes = prepare_rehearsal(config, work_dir, cfg_options, **miniature)
    report = RehearsalReport(config, work_dir, nproc, notes)
    for note in notes:
        echo(f'[rehearse] {note}')
    run_dir = osp.join(work_dir, 'run')
    os.makedirs(osp.join(work_dir, 'logs'), exist_ok=True)
    if one_session:
        plan = osp.join(work_dir, 'session.json')
        atomic_write_text(plan, json.dumps(_phases_plan(path, work_dir, first), indent=1))
        plans = [(SESSION, commands.rehearsal_session(plan, nproc))]
    else:
        plans = [('train', commands.rehearsal_train(path, run_dir, first, False, nproc)),
                 ('resume', commands.rehearsal_train(path, run_dir, {}, True, nproc)),
                 ('test', None)]
    for name, args in plans:
        if args is None:
            record = osp.join(run_dir, 'last_checkpoint')
            checkpoint = Path(record).read_text().strip() if osp.isfile(record) else None
            if not checkpoint:
                break  # check_rehearsal: the test phase did not run
            args = commands.rehearsal_test(path, checkpoint, osp.join(work_dir, 'test'), nproc)
        echo(f'[rehearse] phase {name}: {nproc} process(es) ...')
        result = _run_phase(name, commands.irtbox_command(args),
                            osp.join(work_dir, 'logs', f'{name}.log'), timeout)
        report.phases.append(result)
        echo(f'[rehearse] phase {name}: {result.status} after {result.seconds:.1f} s '
             f'(log: {result.log})')
        if result.returncode != 0:
            break
    return _checked(report, timeout)


def _checked(report: RehearsalReport, timeout: float) -> RehearsalReport:
    report.checks = check_rehearsal(report, timeout)
    atomic_write_text(osp.join(report.work_dir, _MARKER), json.dumps(asdict(report), indent=1))
    return report


def _phases_plan(path: str, work_dir: str, first: dict) -> dict:
    return commands.rehearsal_phases(path, osp.join(work_dir, 'run'), first,
                                     osp.join(work_dir, 'test'))


def _member_ended(work_dir: str, nproc: int) -> bool:
    return all(osp.isfile(member_record(work_dir, rank)) for rank in range(nproc))


def _member_records(work_dir: str, nproc: int) -> Optional[List[dict]]:
    if not _member_ended(work_dir, nproc):
        return None
    return [read_json(member_record(work_dir, rank)) for rank in range(nproc)]


def rehearse_batch(members: Sequence[Tuple[str, str, tuple]], plan: str, nproc: int = 2,
                   timeout: float = 600) -> List[Optional[RehearsalReport]]:
    """The one-session rehearsals of ``members`` ((config, work_dir, what
    :func:`prepare_rehearsal` returned for it)), one after the other in ONE launcher session
    (plan ``plan``, its output beside it with ``.log``): each rank runs every phase of each,
    each phase a fresh runner, as a one-session rehearsal does, its output in
    :func:`member_log`. An error in a phase on any rank ends that rehearsal on every rank (the
    ranks agree on it, then check that their process group still works) and the session goes
    on with the next one; each rehearsal is then checked on its own work dir, as
    :func:`rehearse` checks it. ``timeout``: seconds each rehearsal may take. Returns the
    reports in order; None for a rehearsal the session ended before (a crash, a hang, a rank
    that left): rehearse it in a session of its own, where its failure is its own."""
    for folder in [osp.dirname(plan)] + [osp.join(w, 'logs') for _, w, _ in members]:
        os.makedirs(folder, exist_ok=True)
    atomic_write_text(plan, json.dumps(dict(rehearsals=[
        dict(work_dir=work_dir, **_phases_plan(path, work_dir, first))
        for _, work_dir, (path, first, _) in members]), indent=1))
    command = commands.irtbox_command(commands.rehearsal_session(plan, nproc))
    _run_phase(SESSION, command, osp.splitext(plan)[0] + '.log', timeout,
               progress=lambda: sum(_member_ended(w, nproc) for _, w, _ in members))
    reports = []
    for config, work_dir, (_, _, notes) in members:
        records = _member_records(work_dir, nproc)
        if records is None:
            reports.append(None)
            continue
        failed = [rank for rank, record in enumerate(records) if record['status']]
        report = RehearsalReport(config, work_dir, nproc, notes, phases=[PhaseResult(
            SESSION, command, max(r['seconds'] for r in records),
            records[failed[0]]['status'] if failed else 0,
            member_log(work_dir, failed[0] if failed else 0))])
        reports.append(_checked(report, timeout))
    return reports


def _log_lines(path: str) -> List[str]:
    try:
        with open(path, errors='replace') as f:
            return f.read().splitlines()
    except OSError:
        return []


def _tail(path: str, lines: int = 5) -> str:
    return ' | '.join(line.strip() for line in _log_lines(path)[-lines:])


_ROOT_CAUSE = re.compile(r'Root Cause \(first observed failure\):\s*\[\d+\]:.*?'
                         r'rank\s*:\s*(\d+) \(local_rank: (\d+)\)', re.S)
_RANK_PREFIX = re.compile(r'^\[rank\d+\]: ?')


def _failure_cause(path: str) -> Optional[str]:
    """The last exception of the failing rank in a phase's log (torchrun's root cause names
    the rank), e.g. ``KeyError: 'mAP'``, else an irtbox command's one-line error, else None."""
    lines = _log_lines(path)
    cause = _ROOT_CAUSE.search('\n'.join(lines))
    if cause is not None:
        prefix = f'[default{cause.group(2)}]:'
        lines = [line[len(prefix):] for line in lines if line.startswith(prefix)]
    # torch's distributed error handler prefixes a rank's traceback lines with '[rankN]: '
    lines = [_RANK_PREFIX.sub('', line).rstrip() for line in lines]
    lines = [line for line in lines if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith('Traceback (most recent')]
    if starts:  # the first line of the last traceback that is not a frame: the exception
        found = next((line for line in lines[starts[-1] + 1:] if not line[0].isspace()), None)
        if found is not None:
            return (f'rank {cause.group(1)}: ' if cause else '') + found
    if cause is not None and lines:
        return f'rank {cause.group(1)}: {lines[-1]}'
    return None


def _records(probe_dir: str, phase: str, nproc: int) -> Dict[int, dict]:
    records = {}
    for rank in range(nproc):
        path = osp.join(probe_dir, f'{phase}_rank{rank}.json')
        if osp.isfile(path):
            records[rank] = read_json(path)
    return records


def _file_digest(path: str) -> str:
    return state_digest(safe_torch_load(path)['state_dict'])


def check_rehearsal(report: RehearsalReport, timeout: float) -> List[Check]:
    """The checks of the module doc, on the phases and probe records of ``report``."""
    checks = []
    for phase in report.phases:
        if phase.returncode is None:
            checks.append(Check(f'phase {phase.name}', False,
                                f'hung: no exit within {timeout:.0f} s (log: {phase.log}: '
                                f'{_tail(phase.log)})'))
        else:
            checks.append(Check(f'phase {phase.name}', phase.returncode == 0,
                                f'{phase.seconds:.1f} s' if phase.returncode == 0 else
                                f'exit {phase.returncode} (log: {phase.log}: '
                                f'{_failure_cause(phase.log) or _tail(phase.log)})'))
    ran = [p.name for p in report.phases]
    if ran != [SESSION] and ran != list(PHASES[:len(ran)]):
        checks.append(Check('phases', False, f'unexpected phases: {", ".join(ran)}'))
    elif ran != [SESSION] and len(ran) < len(PHASES):
        checks.append(Check(f'phase {PHASES[len(ran)]}', False,
                            f'not run: no checkpoint in {osp.join(report.work_dir, "run")}'
                            if all(c.ok for c in checks) else 'not run'))
    if not all(c.ok for c in checks):
        return checks
    probe = osp.join(report.work_dir, 'probe')
    rec = {phase: _records(probe, phase, report.nproc) for phase in PHASES}
    missing = [f'{p} rank {r}' for p in PHASES for r in range(report.nproc) if r not in rec[p]]
    if missing:
        return checks + [Check('probe records', False, f'missing: {", ".join(missing)}')]
    checks.append(_check_start_weights(report, rec['train']))
    same = rec['train'][0]['start']['backbone'] == rec['train'][0]['end']['backbone']
    checks.append(Check('weights changed', not same, 'the backbone after the first phase '
                        'equals the one it started from' if same else ''))
    checks.append(_check_ranks_agree(rec))
    checks.append(_check_round_trip(report, rec))
    checks.append(_check_hooks(rec))
    checks.append(_check_metrics(rec))
    checks.append(_check_validation_checkpoint(rec))
    return checks


def _check_validation_checkpoint(rec: Dict[str, Dict[int, dict]]) -> Check:
    """Where training validates, a checkpoint fell on a validation iteration: the state it
    saves there (early stopping's best, the weights) is what a resumed run starts from."""
    name = 'a checkpoint fell on a validation iteration'
    validated = {i for phase in ('train', 'resume') for i in rec[phase][0].get('val_iters', [])}
    if not validated:
        return Check(name, True, 'nothing to check: training does not validate')
    saved = {s['iter'] for phase in ('train', 'resume') for s in rec[phase][0]['saved']}
    both = sorted(validated & saved)
    return Check(name, bool(both), f'iterations {both}' if both else
                 f'validations at iterations {sorted(validated)}, checkpoints at '
                 f'{sorted(saved)}')


def _check_start_weights(report: RehearsalReport, train: Dict[int, dict]) -> Check:
    cfg = load_config(osp.join(report.work_dir, 'rehearsal_config.py'))
    backbone = cfg.model.get('backbone') or {}
    if not (backbone.get('pretrained') or backbone.get('checkpoint')):
        return Check('started from the expected weights', True,
                     'nothing to check: the backbone starts from random weights')
    with offline_hub():
        expected = state_digest(MODELS.build(backbone).state_dict())
    wrong = [r for r, record in train.items() if record['start']['backbone'] != expected]
    return Check('started from the expected weights', not wrong,
                 f'ranks {wrong} started from other weights than the backbone\'s own '
                 f'(expected sha256 {expected[:16]})' if wrong else f'sha256 {expected[:16]}')


def _check_ranks_agree(rec: Dict[str, Dict[int, dict]]) -> Check:
    differ = []
    for phase in ('train', 'resume'):
        for moment in ('start', 'end'):
            digests = {r: record[moment]['model'] for r, record in rec[phase].items()}
            if len(set(digests.values())) > 1:
                differ.append(f'{phase} {moment}')
    return Check('every rank holds the same weights and buffers', not differ,
                 f'ranks differ at: {", ".join(differ)}' if differ else '')


def _check_round_trip(report: RehearsalReport, rec: Dict[str, Dict[int, dict]]) -> Check:
    """Every checkpoint file equals a model that was saved; the resumed run started from
    the first phase's last checkpoint, on every rank."""
    name = 'the checkpoint round-trips'
    saved = {s['model'] for phase in ('train', 'resume') for s in rec[phase][0]['saved']}
    files = run_checkpoints(osp.join(report.work_dir, 'run'))
    if not rec['train'][0]['saved'] or not files:
        return Check(name, False, 'the first phase saved no checkpoint')
    changed = [osp.basename(f) for f in files if _file_digest(f) not in saved]
    if changed:
        return Check(name, False, f'{", ".join(changed)} differ(s) from every model saved')
    resumed_from = rec['train'][0]['saved'][-1]['model']
    wrong = [r for r, record in rec['resume'].items() if record['start']['model'] != resumed_from]
    if wrong:
        return Check(name, False, f'the resumed run started on ranks {wrong} from other '
                     "weights than the first phase's last checkpoint")
    return Check(name, True, f'{len(files)} checkpoints')


def _check_hooks(rec: Dict[str, Dict[int, dict]]) -> Check:
    worked: Dict[str, bool] = {}
    for phase in PHASES:
        for name, did in rec[phase][0].get('worked', {}).items():
            worked[name] = worked.get(name, False) or did
    idle = sorted(name for name, did in worked.items() if not did)
    unfitted = sorted({m for phase in PHASES for m in rec[phase][0].get('unfitted', [])})
    problems = ([f'never did its work: {", ".join(idle)}'] if idle else []) + \
        ([f'left unfitted: {", ".join(unfitted)}'] if unfitted else [])
    return Check('every hook did its work', not problems,
                 '; '.join(problems) or f'{len(worked)} hooks')


def _check_metrics(rec: Dict[str, Dict[int, dict]]) -> Check:
    values = {}
    for phase in PHASES:
        for metrics in rec[phase][0]['val'] + rec[phase][0]['test']:
            for key, value in metrics.items():
                values[f'{phase}:{key}'] = value
    bad = sorted(k for k, v in values.items() if not isinstance(v, (int, float)))
    if not rec['test'][0]['test']:
        return Check('metrics are finite', False, 'the test phase reported no metric')
    return Check('metrics are finite', not bad,
                 f'not finite: {", ".join(f"{k}={values[k]}" for k in bad)}' if bad
                 else f'{len(values)} values')
