"""Several processes on this machine: ``irtbox train|test|extract ... --nproc N``.

The command replaces itself (``exec``) by torchrun's agent running ``python -m irtbox COMMAND
... --launcher pytorch`` N times: one process per GPU (nccl), or CPU processes (gloo) where
there is no GPU. ``tools/dist_train.sh``, ``dist_test.sh`` and ``dist_extract.sh`` are this
command. Several machines: ``NNODES``, ``NODE_RANK``, ``MASTER_ADDR`` and ``PORT`` from the
environment, as torchrun takes them (docs/get_started.md).
"""
import argparse
import os
import sys
from typing import List, Optional, Sequence

__all__ = ['add_nproc_argument', 'torchrun_command', 'relaunch']


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be a positive integer, got {text}')
    return value


def add_nproc_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--nproc', type=_count, default=1, metavar='N',
                        help='run on N processes of this machine with torchrun (one per GPU, '
                        'or CPU processes with gloo); default 1')


def torchrun_command(command: str, nproc: int, args: Sequence[str],
                     env: Optional[dict] = None) -> List[str]:
    """The command line that runs ``irtbox COMMAND ARGS`` on ``nproc`` processes per node,
    the nodes (``NNODES``, ``NODE_RANK``, ``MASTER_ADDR``, ``PORT``) taken from ``env``."""
    env = os.environ if env is None else env
    return [sys.executable, '-m', 'torch.distributed.run',
            f'--nnodes={env.get("NNODES", "1")}', f'--node_rank={env.get("NODE_RANK", "0")}',
            f'--master_addr={env.get("MASTER_ADDR", "127.0.0.1")}',
            f'--master_port={env.get("PORT", "29500")}', f'--nproc_per_node={nproc}',
            '-m', 'irtbox', command, '--launcher', 'pytorch', *args]


def _without_nproc(argv: List[str]) -> List[str]:
    """``argv`` less its ``--nproc N`` (or ``--nproc=N``, or an abbreviation argparse took):
    torchrun would read it as its own ``--nproc-per-node`` and refuse it as ambiguous."""
    kept, skip = [], False
    for token in argv:
        name = token.split('=', 1)[0]
        if skip:
            skip = False
        elif len(name) > 2 and '--nproc'.startswith(name):
            skip = '=' not in token
        else:
            kept.append(token)
    return kept


def relaunch(command: str, args: argparse.Namespace, argv: Optional[Sequence[str]]) -> None:
    """With ``--nproc N > 1`` and no launcher yet, replace this process by torchrun running
    the same command line on N processes (which then come back here with ``--launcher
    pytorch`` and run); otherwise return."""
    if args.nproc == 1 or args.launcher != 'none':
        return
    argv = list(sys.argv[1:] if argv is None else argv)
    line = torchrun_command(command, args.nproc, _without_nproc(argv))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(line[0], line)
