"""Rehearse a config before a real run: the config's own model and hooks, in miniature, on
several processes, through the same launchers (tools/dist_train.sh, tools/dist_test.sh).

Three phases, each under --timeout: train (half the schedule, ending in a checkpoint),
resume (--resume to the end) and test (tools/test.py on the last checkpoint). Checked:
every phase ended (none hung); training started from the backbone's expected weights
(timm's pretrained ones if cached, else a stand-in checkpoint of known values); the weights
changed; every rank held the same weights and buffers; the checkpoint on disk equals the
saved model and the resumed run started from it; every hook did its work (fit hooks,
mining, validation, early stopping, checkpoints); every metric is finite. Exits 1 naming
the first failed check; the report is written to <work-dir>/rehearsal.json.

--quick: 2 processes, one iteration per phase (one epoch for epoch-based configs), inputs of
32 pixels and a transformer backbone with the fewest blocks its outputs need, the three phases
in one launcher session (each rank runs them one after the other, each a fresh runner; the
processes start once): every code path of the config, and what the ranks exchange (fitted
buffers, gathers, checkpoints), in seconds. With --all-kinds, up to --kinds-per-session kinds
share one session (a kind that fails there fails alone; one that crashes or hangs it is
rehearsed again in a session of its own).

--all-kinds: instead of one config, the cheapest shipped config of each kind (what a rehearsal
exercises: backbone family, necks, losses, Partial FC, hooks, sampler, loop, dataset types;
irtbox.ops.rehearsal_kinds), one after the other, each in <work-dir>/<config name>, with a
summary; what CI runs (with --quick). Run it after changing a part many configs share. With
--list it only prints the kinds and the config chosen for each.

Examples:
  python tools/misc/rehearse.py configs/dtop/r50vitb_sfm.py                 # 2 processes
  python tools/misc/rehearse.py configs/dtop/r50vitb_sfm.py --quick
  python tools/misc/rehearse.py --all-kinds --quick                         # every kind
  python tools/misc/rehearse.py --all-kinds --list
  python tools/misc/rehearse.py configs/irt/irt-r_deit-s_1xb64-35k_sop.py --nproc 4
  python tools/misc/rehearse.py my_config.py --data-root data --subset 64  # your own data
  python tools/misc/rehearse.py CONFIG --input-size 0     # the config's own input sizes
"""
import argparse
import contextlib
import importlib
import json
import os
import os.path as osp
import sys
import time

from irtbox.cli import add_cfg_options, command_parser, worded
from irtbox.utils.checks import int_argument

__all__ = ['parse_args', 'main']


def parse_args(argv=None):
    from irtbox.ops.miniaturize import DEFAULT_INPUT_SIZE, QUICK_INPUT_SIZE
    parser = command_parser('Rehearse a config in miniature before a real run.', __doc__)
    parser.add_argument('config', nargs='?', help='config file (Python); none with --all-kinds')
    parser.add_argument('--all-kinds', action='store_true',
                        help='rehearse the cheapest shipped config of each kind instead')
    parser.add_argument('--list', action='store_true',
                        help='with --all-kinds: print the kinds and their configs, rehearse none')
    parser.add_argument('--quick', action='store_true',
                        help='1 iteration per phase, 32-pixel inputs, a shallow transformer '
                        'backbone (unless --iters / --input-size say otherwise), the phases in '
                        'one launcher session')
    parser.add_argument('--only', nargs='+', metavar='TEXT',
                        help='with --all-kinds: only the kinds whose chosen config path holds '
                        'one of these texts (e.g. --only pca128 dtop/)')
    parser.add_argument('--jobs', type=int_argument(1), default=1,
                        help='with --all-kinds: rehearsals run at once, each in a process of '
                        'its own (default 1; 2 on 2 cores with --quick: much of a rehearsal is '
                        'one core starting processes)')
    parser.add_argument('--kinds-per-session', type=int_argument(1), metavar='K',
                        help='with --all-kinds --quick: up to K kinds rehearsed one after the '
                        'other in one launcher session (one process start for them; a kind '
                        'that fails ends alone, one that crashes or hangs the session is '
                        'rehearsed again alone); fewer where a job would get none; default 6')
    parser.add_argument('--nproc', type=int_argument(1),
                        help='processes (GPUs with NCCL, else CPU processes with gloo); '
                        'default 2, so that the ranks can be compared')
    parser.add_argument('--work-dir', help='where the rehearsal writes its data, weights, runs '
                        'and logs (default: ./work_dirs/rehearse/<config name>, with '
                        '--all-kinds ./work_dirs/rehearse_kinds); emptied first if an earlier '
                        'rehearsal made it')
    parser.add_argument('--data-root', help="your own data instead of miniatures: the folder "
                        "holding the datasets as the config names them (data/sop -> "
                        "DATA_ROOT/sop)")
    parser.add_argument('--subset', type=int_argument(1),
                        help='with --data-root: the first N items of each '
                        'dataset')
    parser.add_argument('--input-size', type=int_argument(0),
                        help='the model input side the pipelines are scaled to (default '
                        f'{DEFAULT_INPUT_SIZE}, {QUICK_INPUT_SIZE} with --quick); 0 keeps the '
                        'config\'s sizes')
    parser.add_argument('--iters', type=int_argument(1),
                        help='iterations per phase of an iteration-based schedule (default 2, 1 '
                        'with --quick; epoch-based schedules run one epoch per phase)')
    parser.add_argument('--batch-size', type=int_argument(1), default=8,
                        help='largest batch per process (default 8)')
    parser.add_argument('--workers', type=int_argument(0), default=None,
                        help='most dataloader workers per loader (default 1; 0 with --quick, '
                        'whose phases share a process: the workers a phase leaves took '
                        'about 5 s each to stop in the next one)')
    parser.add_argument('--timeout', type=float, default=600,
                        help='seconds a phase may take before it counts as hung (default 600)')
    add_cfg_options(parser, 'override config entries before the miniature is made')
    # A one-session rehearsal's ranks (irtbox.ops.commands.rehearsal_session): not for users.
    parser.add_argument('--session', help=argparse.SUPPRESS)
    parser.add_argument('--launcher', default='none', help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _defaults(args) -> None:
    """The values --quick (or the plain rehearsal) gives to what the command line left unset."""
    from irtbox.ops.miniaturize import DEFAULT_INPUT_SIZE, QUICK_INPUT_SIZE
    quick = dict(nproc=2, iters=1, input_size=QUICK_INPUT_SIZE, workers=0)
    plain = dict(nproc=2, iters=2, input_size=DEFAULT_INPUT_SIZE, workers=1)
    for key, value in (quick if args.quick else plain).items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def main(argv=None):
    args = parse_args(argv)
    if args.session:
        return _session(args, argv)
    if args.all_kinds == bool(args.config):
        raise SystemExit('rehearse: give a config or --all-kinds (not both)')
    if (args.list or args.jobs != 1 or args.only) and not args.all_kinds:
        raise SystemExit('rehearse: --list, --only and --jobs only with --all-kinds')
    if args.kinds_per_session is not None and not (args.all_kinds and args.quick):
        raise SystemExit('rehearse: --kinds-per-session only with --all-kinds --quick (a full '
                         'rehearsal runs each phase in processes of its own)')
    if args.subset and not args.data_root:
        raise SystemExit('--subset: only with --data-root (the miniatures are already small)')
    _defaults(args)
    options = dict(nproc=args.nproc, timeout=args.timeout,
                   cfg_options=args.cfg_options,
                   input_size=args.input_size, data_root=args.data_root, subset=args.subset,
                   units=args.iters, batch_size=args.batch_size, workers=args.workers,
                   shallow=args.quick, one_session=args.quick)
    if args.all_kinds:
        return _all_kinds(args, options)
    from irtbox.ops.rehearse import rehearse
    work_dir = args.work_dir or osp.join(
        'work_dirs', 'rehearse', osp.splitext(osp.basename(args.config))[0])
    try:
        report = rehearse(args.config, work_dir, **options)
    except (FileExistsError, FileNotFoundError, ValueError) as error:
        raise SystemExit(f'rehearse: {worded(error)}') from error
    except KeyboardInterrupt as error:  # one line, not the traceback (the phase is stopped)
        print(f'rehearse: {args.config}: {error or "interrupted"}', file=sys.stderr)
        raise SystemExit(130) from None
    print(report.table())
    failure = report.first_failure
    if failure is not None:
        print(f'rehearse: FAILED: {failure.name}: {failure.detail}', file=sys.stderr)
        raise SystemExit(1)
    total = sum(p.seconds for p in report.phases)
    print(f'rehearse: {args.config}: every check passed ({total:.0f} s, {args.nproc} '
          f'process(es)); report: {osp.join(work_dir, "rehearsal.json")}')
    if not args.data_root:
        print(unchecked_data_line(args.config, args.cfg_options))
    return report


def _session(args, argv) -> None:
    """Run the phases of the plan ``args.session`` one after the other on every rank (with
    ``--nproc N``, first replace this process by a launcher of N of them), each phase the
    command users run, in this process, with a fresh runner; a batch's plan
    (:func:`irtbox.ops.rehearse.rehearse_batch`) lists several rehearsals, each run so."""
    from irtbox.cli.launch import relaunch
    relaunch('rehearse', argparse.Namespace(launcher=args.launcher, nproc=args.nproc or 1,
                                            max_restarts=0, nnodes=None, rdzv_endpoint=None,
                                            rdzv_id=None), argv)
    from irtbox.utils.fileio import read_json
    plan = read_json(args.session)
    if 'rehearsals' not in plan:  # one rehearsal: an error ends the session (torchrun names it)
        for phase in plan['phases']:
            _phase(phase, args.launcher)
            _barrier()  # every rank's phase, and rank 0's files, done before the next starts
        return
    for i, member in enumerate(plan['rehearsals'], 1):
        _member(member, args.launcher, f'{i}/{len(plan["rehearsals"])}')


def _phase(phase: dict, launcher: str) -> None:
    from irtbox.cli.main import COMMANDS
    command = list(phase['args'])
    if phase.get('checkpoint_of'):  # the checkpoint the phase before it saved last
        with open(osp.join(phase['checkpoint_of'], 'last_checkpoint')) as f:
            command.insert(2, f.read().strip())
    os.environ['IRTBOX_REHEARSAL_PHASE'] = phase['name']  # the probe's record of it
    print(f'[rehearse session] phase {phase["name"]}: irtbox {" ".join(command)}', flush=True)
    module = importlib.import_module(f'irtbox.cli.{COMMANDS[command[0]][0]}')
    start = time.monotonic()
    module.main(command[1:] + ['--launcher', launcher])
    print(f'[rehearse session] phase {phase["name"]}: done in {time.monotonic() - start:.1f} s',
          flush=True)


# How long a rank whose phase failed waits for the others to end that phase too: past it, they
# are taken to wait for it in a collective it left, and it leaves the session (so do they), whose
# rehearsals left are then rehearsed one session each.
_PEERS_GRACE = 30.0


def _member(member: dict, launcher: str, position: str) -> None:
    """One rehearsal of a batch session on this rank: its phases, its output into its own log
    (:func:`irtbox.ops.rehearse.member_log`), what the process-wide state its runners set
    restored after it. After each phase the ranks tell each other over files whether it
    failed (not over the process group: the failing rank may have left it mid-collective); a
    failure on any rank ends the rehearsal on every rank, then a barrier checks that the group
    still works before the next rehearsal's collectives."""
    import traceback

    from irtbox.ops.rehearse import member_log, member_record
    from irtbox.utils.fileio import atomic_write_text
    rank, world = int(os.environ.get('RANK', 0)), int(os.environ.get('WORLD_SIZE', 1))
    log = member_log(member['work_dir'], rank)
    print(f'[rehearse session] rehearsal {position}: {member["work_dir"]} (output: {log})',
          flush=True)
    start, status, error = time.monotonic(), 0, None
    with _output_to(log), _process_state_kept():
        for phase in member['phases']:
            try:
                _phase(phase, launcher)
            except Exception as err:  # noqa: BLE001  (this rehearsal's failure, not the batch's)
                traceback.print_exc()
                status, error = 1, f'{type(err).__name__}: {err}'
            except SystemExit as err:  # a command's own exit (its message already printed)
                if err.code not in (None, 0):
                    if not isinstance(err.code, int):  # the message Python would print
                        print(err.code, file=sys.stderr, flush=True)
                    status = err.code if isinstance(err.code, int) else 1
                    error = f'SystemExit: {err.code}'
            ended = osp.join(member['work_dir'], 'logs', f'ended_{phase["name"]}_rank')
            if _peers_failed(ended, rank, world, error):
                break
    atomic_write_text(member_record(member['work_dir'], rank), json.dumps(dict(
        seconds=time.monotonic() - start, status=status, error=error)))
    _barrier()  # the process group still works: the next rehearsal's collectives can start
    print(f'[rehearse session] rehearsal {position}: '
          + (f'failed on this rank ({error})' if error else 'ended'), flush=True)


def _peers_failed(prefix: str, rank: int, world: int, error) -> bool:
    """Whether any rank failed the phase: each writes ``<prefix><rank>.json`` (its error or
    null) and waits for every other's."""
    from irtbox.utils.fileio import atomic_write_text, read_json
    atomic_write_text(f'{prefix}{rank}.json', json.dumps(error))
    paths = [f'{prefix}{r}.json' for r in range(world)]
    deadline = time.monotonic() + _PEERS_GRACE
    while not all(map(osp.isfile, paths)):
        if error is not None and time.monotonic() > deadline:
            print(f'[rehearse session] rank {rank}: the other ranks did not end the phase '
                  f'within {_PEERS_GRACE:.0f} s of its error: leaving the session', flush=True)
            os._exit(1)  # the launcher ends the others; the rest is rehearsed one by one
        time.sleep(0.05)
    return any(read_json(path) is not None for path in paths)


@contextlib.contextmanager
def _output_to(path: str):
    """This process's stdout and stderr (the file descriptors: C++ warnings too) into
    ``path`` for the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(path, 'a') as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def _process_state_kept():
    """The environment variables and torch's process-wide switches (cuDNN's, TF32,
    deterministic algorithms, the default dtype) as they were before the block: a runner sets
    some (``env_cfg``, ``randomness``), and the next rehearsal of the session must not inherit
    them. MMEngine's named instances (message hub, visualizer, logger, scope) need nothing:
    each runner of a process gets its own name (``IrtboxRunner``)."""
    import gc

    import torch
    environ = dict(os.environ)
    switches = [(torch.backends.cudnn, 'benchmark'), (torch.backends.cudnn, 'deterministic'),
                (torch.backends.cudnn, 'allow_tf32'), (torch.backends.cuda.matmul, 'allow_tf32')]
    values = [getattr(owner, name) for owner, name in switches]
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    dtype = torch.get_default_dtype()
    try:
        yield
    finally:
        for key in set(os.environ) - set(environ):
            del os.environ[key]
        os.environ.update(environ)
        for (owner, name), value in zip(switches, values):
            setattr(owner, name, value)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        torch.set_default_dtype(dtype)
        gc.collect()  # the rehearsal's runners, models and loaders, before the next one's


def _barrier() -> None:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def unchecked_data_line(config: str, cfg_options=None) -> str:
    """The summary's last line when the rehearsal ran on miniatures: the user's data was not
    read, and how to check it."""
    from irtbox.ops.miniaturize import config_data_roots
    from irtbox.apis.model_zoo import resolve_config
    from irtbox.datasets import dataset_specs
    from irtbox.utils.config import load_config
    cfg = load_config(resolve_config(config), cfg_options)
    roots = config_data_roots(cfg)
    checks = [f'irtbox check {name} --root {root}' for root in roots
              if (name := osp.basename(osp.normpath(root))) in dataset_specs(preparable=True)]
    return (f'data: miniatures — your data at {", ".join(roots) or "(none named)"} was not '
            'checked; check it with ' + ('; '.join(checks) or 'irtbox check NAME --root ROOT')
            + ', or rehearse on it with --data-root')


def _all_kinds(args, options):
    from irtbox.ops.rehearsal_kinds import KINDS_PER_SESSION, rehearsal_set, rehearse_kinds
    chosen = rehearsal_set()
    if args.only:
        chosen = [(kind, config) for kind, config in chosen
                  if any(text in _shown(config) for text in args.only)]
        if not chosen:
            raise SystemExit(f'rehearse: --only {" ".join(args.only)}: no kind\'s config '
                             'path holds any of these')
    if args.list:
        for i, (kind, config) in enumerate(chosen, 1):
            print(f'{i:>3} {_shown(config)}\n    {kind.describe()}')
        print(f'rehearse: {len(chosen)} kinds')
        return chosen
    work_dir = args.work_dir or osp.join('work_dirs', 'rehearse_kinds')
    results = rehearse_kinds(work_dir, chosen, jobs=args.jobs,
                             kinds_per_session=args.kinds_per_session or KINDS_PER_SESSION,
                             **options)
    failed = [r for r in results if not r.ok]
    for result in results:
        status = 'pass' if result.ok else 'FAIL'
        print(f'{status}  {result.seconds:>6.0f} s  {_shown(result.config)}')
    total = sum(r.seconds for r in results)
    print(f'rehearse: {len(results) - len(failed)} of {len(results)} kinds passed in '
          f'{total:.0f} s ({args.nproc} process(es) each); reports under {work_dir}')
    if failed:
        for result in failed:
            failure = result.report.first_failure if result.report else None
            detail = f'{failure.name}: {failure.detail}' if failure else result.error
            print(f'rehearse: FAILED: {_shown(result.config)}: {detail}', file=sys.stderr)
        raise SystemExit(1)
    return results


def _shown(config: str) -> str:
    """A shipped config as users name it (configs/...)."""
    from irtbox.utils.config import CONFIGS_DIR
    relative = osp.relpath(config, CONFIGS_DIR)
    return config if relative.startswith('..') else osp.join('configs', relative)
