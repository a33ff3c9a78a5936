"""Run a grid of trainings (the training-recipe benchmark's sweeps), collect and plot them.

The grid spec's format (irtbox/ops/sweeps/spec.py) and how runs run and resume
(irtbox/ops/sweeps/execute.py) are printed after the examples by --help.

Outputs in WORK_ROOT: runs.csv / runs.json (one row per finished run),
summary.csv (mean, std, min, max over seeds) and the figures
fig_<factor>_<metric>.png, or fig<N>_<factor>_<metric>.png for a factor with
`figure` (tools/analysis_tools/plot_sweep.py).

The library behind this CLI is irtbox/ops/sweeps/ (spec, families, state, runner, tables,
figures).

Examples:
  python tools/sweep.py configs/dml_benchmark/sweeps/digits_tiny.py --work-root work_dirs/sweep
  python tools/sweep.py SPEC --work-root W --jobs 2              # two runs at a time
  python tools/sweep.py SPEC --work-root W --datasets cub --losses arcface --seeds 0  # a part
  python tools/sweep.py SPEC --work-root W --dry-run             # list the runs and their state
  python tools/sweep.py SPEC --work-root W --emit dist --gpus 8 > jobs.sh
  python tools/sweep.py SPEC --work-root W --emit slurm --partition gpu
  python tools/sweep.py SPEC --work-root W --launcher slurm --partition gpu --max-parallel 16
                                  # one submitit job array of the unfinished runs, 16 at a time,
                                  # each pre-emptible and requeued (irtbox/ops/sweeps/slurm.py)
  python tools/sweep.py status SPEC --work-root W    # done / running / failed / pending
  python tools/sweep.py SPEC --work-root W --collect-only    # when the array has ended
  python tools/sweep.py SPEC --work-root W --collect-only        # table and figures only
Run it (and the emitted commands) from the repository root.
"""
import os
import os.path as osp
import sys

from irtbox.cli import command_parser
from irtbox.ops.commands import emit_command
from irtbox.ops.sweeps import execute as execute_module
from irtbox.ops.sweeps import slurm
from irtbox.ops.sweeps import spec as spec_module
from irtbox.ops.sweeps import (EMBEDDINGS, FAILED, LOG, PREEMPTED_MARK, RESULTS, SUMMARY_DECIMALS,
                           TRAIN_DONE, SelectionError, collect, format_tables,
                           expand, load_spec, plot_all, run_all, select_runs, state_of,
                           summarize, write_table)
from irtbox.utils.checks import int_argument
from irtbox.utils.extras import MissingExtraError, require_extra

__all__ = ['parse_args', 'main']

#: submitit's executor for --launcher slurm ('local' runs the array's tasks here: the tests).
SLURM_CLUSTER = 'slurm'

SUBSET_OPTIONS = dict(factors='--only', datasets='--datasets', losses='--losses',
                      seeds='--seeds')


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    status = argv[:1] == ['status']  # `sweep.py status SPEC ...`
    if status:
        argv = argv[1:]
    parser = command_parser('Run, collect and plot a grid of irtbox trainings.',
                            '\n'.join([__doc__, spec_module.__doc__, execute_module.__doc__,
                                       slurm.__doc__]))
    parser.add_argument('spec', help='grid spec (.py, .yaml or .json)')
    parser.add_argument('--work-root', required=True, help='folder of all the runs and outputs')
    parser.add_argument('--emit', choices=['plain', 'dist', 'slurm'],
                        help='print one shell command per unfinished run instead of running it')
    parser.add_argument('--launcher', choices=['local', 'slurm'], default='local',
                        help='local: run the runs here (default); slurm: submit the unfinished '
                        'ones as one job array with submitit and return (its tasks are '
                        'pre-emptible and requeued); pip install "irtbox[slurm]"')
    parser.add_argument('--max-parallel', type=int_argument(1), metavar='N',
                        help='at most N runs at once: the job array\'s throttle (%%N) with '
                        '--launcher slurm, --jobs N here')
    parser.add_argument('--timeout-min', type=int_argument(1), default=1440, metavar='MIN',
                        help='--launcher slurm: time limit of each task in minutes (default 1440; '
                        'a requeued task starts it again)')
    parser.add_argument('--slurm-params', nargs='+', default=[], metavar='KEY=VALUE',
                        help='--launcher slurm: more #SBATCH options of the array, e.g. '
                        'qos=high account=vision')
    parser.add_argument('--wait', action='store_true',
                        help='--launcher slurm: wait for the array to end, then write the '
                        'tables and figures')
    parser.add_argument('--jobs', type=int_argument(1), default=1,
                        help='runs at a time when running them here (default 1); each gets '
                        'cores/jobs threads and a visible GPU, the GPUs in turn (several runs '
                        'share one when there are more runs than GPUs)')
    parser.add_argument('--gpus', type=int_argument(0), default=1,
                        help='processes (GPUs) per run for --emit dist/slurm and --launcher slurm '
                        '(there, 0: one process and no --gres, for a cluster without GPUs)')
    parser.add_argument('--partition', default='gpu', help='slurm partition for --emit slurm')
    parser.add_argument('--only', nargs='+', metavar='FACTOR', help='only these factors')
    parser.add_argument('--datasets', nargs='+', metavar='DATASET',
                        help="only these of the spec's datasets")
    parser.add_argument('--losses', nargs='+', metavar='LOSS', help="only these of the spec's losses")
    parser.add_argument('--seeds', nargs='+', type=int_argument(0), metavar='SEED',
                        help="only these of the spec's seeds")
    parser.add_argument('--dry-run', action='store_true', help='list the runs and their state')
    parser.add_argument('--collect-only', action='store_true',
                        help='run nothing: write the tables and figures of the finished runs')
    parser.add_argument('--force', action='store_true', help='re-run finished runs')
    parser.add_argument('--keep-embeddings', action='store_true',
                        help="also write each run's test_results.npz (embeddings; large)")
    parser.add_argument('--band', choices=['minmax', 'std'], default='minmax',
                        help='shaded band around the mean over seeds: min-max or mean +- std')
    parser.add_argument('--no-plot', action='store_true', help='tables only')
    args = parser.parse_args(argv)
    args.status = status
    if args.gpus < 1 and args.launcher != 'slurm':  # 0: a CPU cluster, no GPUs requested
        parser.error(f'--gpus must be >= 1 without --launcher slurm, got {args.gpus}')
    params = [p.partition('=') for p in args.slurm_params]
    bad = [key for key, eq, value in params if not (key and eq and value)]
    if bad:
        parser.error(f'--slurm-params: expected KEY=VALUE, got {bad[0]!r}')
    args.slurm_params = {key: value for key, _, value in params}
    if args.max_parallel and args.launcher == 'local':
        args.jobs = args.max_parallel
    return args


def show_status(runs, queue) -> dict:
    """Print one line per run (its status, work dir, detail) and the counts; returns them."""
    counts = dict(done=0, running=0, failed=0, pending=0)
    for run in runs:
        status, detail = slurm.run_status(run, queue)
        counts[status] += 1
        print(f'{status:8s} {run.work_dir}' + (f'  ({detail})' if detail else ''))
    print(', '.join(f'{n} {name}' for name, n in counts.items()) + f' of {len(runs)} runs')
    return counts


def main(argv=None):
    args = parse_args(argv)
    try:
        spec = load_spec(args.spec)
        runs = select_runs(expand(spec, args.work_root), spec, factors=args.only,
                           datasets=args.datasets, losses=args.losses, seeds=args.seeds)
    except SelectionError as error:
        raise SystemExit(f'{SUBSET_OPTIONS[error.key]}: {error}')
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error))
    if args.status:
        return show_status(runs, slurm.queue_states(runs, args.work_root))
    if args.force and not (args.dry_run or args.collect_only):
        for run in runs:
            # The old embeddings too: they would not match the new results.
            for name in (RESULTS, TRAIN_DONE, EMBEDDINGS, FAILED, PREEMPTED_MARK):
                if osp.isfile(osp.join(run.work_dir, name)):
                    os.remove(osp.join(run.work_dir, name))
    if args.dry_run:
        for run in runs:
            print(f'{state_of(run):8s} {run.work_dir}  {run.config}  {" ".join(run.options)}')
        return runs
    if args.emit:
        for run in runs:
            if state_of(run) != 'done':
                print(emit_command(run, args.emit, args.gpus, args.partition,
                                   args.keep_embeddings))
        return runs
    if args.launcher == 'slurm' and not args.collect_only:
        try:  # before any line about the runs: nothing can be submitted without it
            require_extra(['submitit'], 'slurm', 'a sweep on Slurm')
        except MissingExtraError as error:
            raise SystemExit(f'--launcher slurm: {error}')
        queue = slurm.queue_states(runs, args.work_root)
        todo = slurm.unqueued(runs, queue)
        busy = len([r for r in runs if state_of(r) != 'done']) - len(todo)
        print(f'{len(runs) - len(todo) - busy} of {len(runs)} runs finished, {busy} queued or '
              f'running; submitting {len(todo)}', file=sys.stderr)
        if todo:
            try:
                executor = slurm.make_executor(args.work_root, args.partition, args.gpus,
                                               args.max_parallel, args.timeout_min,
                                               args.slurm_params, cluster=SLURM_CLUSTER)
                jobs = slurm.submit_runs(executor, todo, args.keep_embeddings,
                                         args.gpus)
            except (slurm.SubmitError, MissingExtraError) as error:
                raise SystemExit(f'--launcher slurm: {error}')
            print(f'job array {jobs[0].job_id.split("_")[0]}: {len(todo)} runs (output: '
                  f'{osp.join(args.work_root, slurm.JOBS_DIR)}/<job id>/)', file=sys.stderr)
            if args.wait:  # a failed task's run holds a failed file, listed below
                for job in jobs:
                    job.wait()
        if not args.wait:
            print(f'follow it with: tools/sweep.py status {args.spec} --work-root '
                  f'{args.work_root}; then --collect-only writes the tables and figures',
                  file=sys.stderr)
            return todo
    elif not args.collect_only:
        todo = [r for r in runs if state_of(r) != 'done']
        print(f'{len(runs) - len(todo)} of {len(runs)} runs finished; running {len(todo)}, '
              f'{args.jobs} at a time (each run\'s output: <its work dir>/{LOG})',
              file=sys.stderr)
        try:
            run_all(todo, args.jobs, args.keep_embeddings)
        except KeyboardInterrupt:
            raise SystemExit('interrupted: finished runs are kept, the others run on the next '
                             'call')
    failures = [r.work_dir for r in runs if state_of(r) == 'failed']
    try:
        rows = collect(runs, spec['families'])
    except ValueError as error:
        raise SystemExit(str(error))
    if not rows:
        raise SystemExit(f'no finished run under {args.work_root} (no {RESULTS} found)'
                         + (f'; {len(failures)} failed' if failures else ''))
    summary = summarize(rows)
    write_table(rows, osp.join(args.work_root, 'runs.csv'))
    write_table(rows, osp.join(args.work_root, 'runs.json'))
    write_table(summary, osp.join(args.work_root, 'summary.csv'), decimals=SUMMARY_DECIMALS)
    print(format_tables(summary, spec))
    if not args.no_plot:
        try:
            paths = plot_all(summary, spec, args.work_root, band=args.band)
        except MissingExtraError as error:
            raise SystemExit(f'{error} (or run without the figures: --no-plot)') from None
        for path in paths:
            print(path)
    if failures and not args.collect_only:
        raise SystemExit(f'{len(failures)} run(s) failed (their folders hold a `{FAILED}` '
                         'file; the next call retries them):\n  ' + '\n  '.join(failures))
    return rows
