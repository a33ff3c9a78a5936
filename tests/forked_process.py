"""A process of its own for a test that kills or locks out a training, without a fresh
interpreter each time: forked from this test run's forkserver (one per pytest worker, shared
with the other tests that start processes with multiprocessing's forkserver), where torch,
MMEngine, timm and irtbox's training code are imported once. The child is a real process (its
own PID, killed or exiting with its own status); it has run nothing before its target."""
import multiprocessing as mp
import os
import sys

from tests.shared_runs import ROOT, forkserver


def _child(target, args, cwd, env, stdout, stderr):
    os.chdir(cwd)
    os.environ.update(env)
    sys.path[:0] = [p for p in (cwd, ) if p not in sys.path]
    for fd, path in ((1, stdout), (2, stderr)):
        sys.stdout.flush()
        sys.stderr.flush()
        with open(path, 'w') as f:
            os.dup2(f.fileno(), fd)
    target(*args)


def run_in_process(target, args=(), *, cwd=ROOT, env=None, stdout=os.devnull,
                   stderr=os.devnull, timeout=300) -> int:
    """``target(*args)`` (a module-level function) in a child of the forkserver, in ``cwd``
    with ``env`` added to its environment, its output into the files ``stdout`` and
    ``stderr``; its exit status as ``subprocess`` gives it (1 for an exception or a
    ``SystemExit`` with a message, which goes to ``stderr``; ``-N`` when killed by signal N)."""
    context = mp.get_context(forkserver(__name__))
    process = context.Process(target=_child,
                              args=(target, tuple(args), str(cwd), dict(env or {}), str(stdout),
                                    str(stderr)))
    process.start()
    process.join(timeout)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise TimeoutError(f'{target.__name__} did not end in {timeout} s')
    return process.exitcode
