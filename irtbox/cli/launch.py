"""Several processes, and jobs that survive a dead worker: ``irtbox train|test|extract ...
--nproc N [--max-restarts K] [--nnodes N | MIN:MAX --rdzv-endpoint HOST:PORT]``.

The command replaces itself (``exec``) by torchrun's elastic agent
(``torch.distributed.run``, run by :func:`agent_main` here) starting ``python -m irtbox
COMMAND ... --launcher pytorch`` N times: one process per GPU (nccl), or CPU processes (gloo)
where there is no GPU. ``tools/dist_train.sh``, ``dist_test.sh`` and ``dist_extract.sh`` are
this command.

- The rendezvous is torchrun's c10d one: with ``--max-restarts K`` the agent restarts the
  whole group up to K times when a worker dies, and a training resumes from its last
  checkpoint; ``--nnodes MIN:MAX`` lets nodes leave and join between restarts.
- Several machines: the same command on each, with ``--nnodes`` and ``--rdzv-endpoint`` (a
  host of the job and a free port; its agent hosts the rendezvous) and the same
  ``--rdzv-id`` (default: ``RDZV_ID``, else ``SLURM_JOB_ID``; one machine: a fresh id). The
  environment variables ``NNODES``, ``MASTER_ADDR`` and ``PORT`` are the defaults of the
  first two, as before (without ``PORT``: under Slurm the job's own port,
  :func:`irtbox.utils.cpus.job_port`, else 29500).
- SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR1 to the agent go to every worker (a training
  saves a checkpoint on SIGTERM / SIGUSR1); the agent waits ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``
  seconds (torch's default 30) for them, then kills them. Its exit status: 0; 75 when stopped
  by SIGTERM / SIGUSR1 or when every failed worker exited with 75 (pre-empted: run the same
  command again); 128 + N for another signal N; 1 when a worker failed (torchrun's report of
  it on stderr).
"""
import argparse
import os
import re
import signal
import sys
import uuid
from typing import List, Optional, Sequence

from irtbox.utils.checks import int_argument
from irtbox.utils.cpus import job_port
from irtbox.utils.exit_status import PREEMPTED_EXIT_STATUS

__all__ = ['add_launch_arguments', 'torchrun_command', 'relaunch', 'agent_main']

_FORWARDED = 'SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1'
_PREEMPTING = (signal.SIGTERM, signal.SIGUSR1)


def _nodes(text: str) -> str:
    numbers = [int(n) for n in text.split(':')] if re.fullmatch(r'\d+(:\d+)?', text) else [0]
    if min(numbers) < 1 or numbers != sorted(numbers):
        raise argparse.ArgumentTypeError(f'expected N or MIN:MAX (1 <= MIN <= MAX), got {text}')
    return text


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """``--launcher``, the options of several processes and ``--local-rank`` (hidden: what
    ``torch.distributed.launch`` passes)."""
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none',
                        help='job launcher: none (single process), pytorch (torchrun), slurm '
                        '(srun)')
    parser.add_argument('--nproc', type=int_argument(1), default=1, metavar='N',
                        help='run on N processes of this machine with torchrun (one per GPU, '
                        'or CPU processes with gloo); default 1')
    parser.add_argument('--max-restarts', type=int_argument(0), default=0, metavar='K',
                        help="torchrun's agent restarts the whole group up to K times when a "
                        'process dies (training resumes from its last checkpoint); default 0')
    parser.add_argument('--nnodes', type=_nodes, default=None, metavar='N|MIN:MAX',
                        help='machines of the job, each running this command (default: NNODES '
                        'or 1); MIN:MAX is elastic')
    parser.add_argument('--rdzv-endpoint', default=None, metavar='HOST:PORT',
                        help='the rendezvous of several machines (default: MASTER_ADDR:PORT)')
    parser.add_argument('--rdzv-id', default=None, metavar='ID',
                        help='the job id every machine gives (default: RDZV_ID, else '
                        'SLURM_JOB_ID, else a fresh one for one machine)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0, help=argparse.SUPPRESS)


def _uses_torchrun(args: argparse.Namespace, env) -> bool:
    nodes = args.nnodes or env.get('NNODES', '1')
    return args.nproc > 1 or args.max_restarts > 0 or nodes != '1'


def torchrun_command(command: str, nproc: int, args: Sequence[str], env: Optional[dict] = None,
                     max_restarts: int = 0, nnodes: Optional[str] = None,
                     rdzv_endpoint: Optional[str] = None,
                     rdzv_id: Optional[str] = None) -> List[str]:
    """The command line that runs ``irtbox COMMAND ARGS`` on ``nproc`` processes per node under
    torchrun's agent with the c10d rendezvous; what is not given is taken from ``env`` (see
    the module's docstring)."""
    env = os.environ if env is None else env
    nnodes = nnodes or env.get('NNODES', '1')
    if rdzv_endpoint is None:
        host = env.get('MASTER_ADDR', '127.0.0.1')
        # One machine and no PORT: any free port (the agent's store picks one); several: a
        # port every machine derives alike, the job's own under Slurm.
        port = env.get('PORT', '0' if nnodes == '1' else str(job_port(env) or 29500))
        rdzv_endpoint = f'{host}:{port}'
    rdzv_id = rdzv_id or env.get('RDZV_ID') or env.get('SLURM_JOB_ID')
    if rdzv_id is None:
        if nnodes != '1':
            raise SystemExit(f'--nnodes {nnodes}: every machine must give the same --rdzv-id '
                             '(or RDZV_ID, or run under Slurm, whose SLURM_JOB_ID is used)')
        rdzv_id = uuid.uuid4().hex
    return [sys.executable, '-m', 'irtbox.cli.launch',
            f'--nnodes={nnodes}', f'--nproc-per-node={nproc}', '--rdzv-backend=c10d',
            f'--rdzv-endpoint={rdzv_endpoint}', f'--rdzv-id={rdzv_id}',
            f'--max-restarts={max_restarts}', f'--signals-to-handle={_FORWARDED}',
            '-m', 'irtbox', command, '--launcher', 'pytorch', *args]


_LAUNCH_OPTIONS = ('--nproc', '--max-restarts', '--nnodes', '--rdzv-endpoint', '--rdzv-id')


def _without_launch_options(argv: List[str]) -> List[str]:
    """``argv`` less its ``--nproc N``, ``--max-restarts K``, ... (``--opt=V`` too, or an
    abbreviation argparse took): torchrun would read ``--nproc`` as its own
    ``--nproc-per-node`` and refuse it as ambiguous, and the workers do not launch."""
    kept, skip = [], False
    for token in argv:
        name = token.split('=', 1)[0]
        if skip:
            skip = False
        elif len(name) > 3 and any(option.startswith(name) for option in _LAUNCH_OPTIONS):
            skip = '=' not in token
        else:
            kept.append(token)
    return kept


def relaunch(command: str, args: argparse.Namespace, argv: Optional[Sequence[str]]) -> None:
    """With ``--nproc N > 1`` (or ``--max-restarts``, ``--nnodes``) and no launcher yet,
    replace this process by torchrun's agent running the same command line on N processes
    (which then come back here with ``--launcher pytorch`` and run); otherwise return."""
    if args.launcher != 'none' or not _uses_torchrun(args, os.environ):
        return
    argv = list(sys.argv[1:] if argv is None else argv)
    line = torchrun_command(command, args.nproc, _without_launch_options(argv),
                            max_restarts=args.max_restarts, nnodes=args.nnodes,
                            rdzv_endpoint=args.rdzv_endpoint, rdzv_id=args.rdzv_id)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(line[0], line)


def agent_main(argv: Sequence[str]) -> int:
    """Run torchrun (``torch.distributed.run``) with ``argv`` in this process and return the
    exit status the module's docstring lists."""
    # Each attempt's workers get a store of their own: in the agent's (torch's default with
    # c10d) a restarted group read the dead group's addresses and failed to connect.
    os.environ.setdefault('TORCH_DISABLE_SHARE_RDZV_TCP_STORE', '1')
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    try:
        torchrun.main(list(argv))
    except SignalException as stop:
        return PREEMPTED_EXIT_STATUS if stop.sigval in _PREEMPTING else 128 + int(stop.sigval)
    except ChildFailedError as failed:
        codes = {failure.exitcode for failure in failed.failures.values()}
        if codes == {PREEMPTED_EXIT_STATUS}:  # the workers got the signal themselves (Slurm signals all)
            return PREEMPTED_EXIT_STATUS
        print(failed.format_msg(), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(agent_main(sys.argv[1:]))
