"""How an irtbox process ends: the exit status of a pre-empted training (shared by the
training, torchrun's agent :mod:`irtbox.cli.launch` and the sweeps) and ending with its
parent. Its own module, without torch, so that the launcher, the sweep driver and every
command's start read it at once."""
import ctypes
import ctypes.util
import os
import signal
import sys

__all__ = ['PREEMPTED_EXIT_STATUS', 'exit_with_parent', 'EXIT_WITH_PARENT_VAR',
           'exit_with_parent_if_asked']

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>

#: A training stopped by SIGTERM / SIGUSR1 after its checkpoint was saved: run the same
#: command again. ``EX_TEMPFAIL`` of ``sysexits.h`` ("temporary failure; try again later").
PREEMPTED_EXIT_STATUS = 75


def exit_with_parent(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent (the ``torchrun``
    launcher) dies, so that a killed launcher leaves no orphaned ranks (Linux
    ``prctl(PR_SET_PDEATHSIG)``; a no-op elsewhere). Dataloader workers need nothing: they
    already exit once their rank is gone (PyTorch's worker watchdog, within seconds)."""
    if not sys.platform.startswith('linux'):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), 'prctl(PR_SET_PDEATHSIG) failed')
    if os.getppid() != parent:  # the launcher died before the signal was armed
        os.kill(os.getpid(), sig)


#: Set to 1 by a parent in its child's environment (rehearse's phases, a sweep's runs): the
#: child, an ``irtbox`` command, then ends with it (:func:`exit_with_parent_if_asked`).
EXIT_WITH_PARENT_VAR = 'IRTBOX_EXIT_WITH_PARENT'


def exit_with_parent_if_asked() -> None:
    """:func:`exit_with_parent` when :data:`EXIT_WITH_PARENT_VAR` is 1 (removed from the
    environment: this process's own children are not its parent's). Armed in the child
    itself rather than by ``preexec_fn``, which is unsafe in a threaded parent (a sweep
    runs its runs from threads). The signal survives ``exec``: a launcher that replaces the
    command (torchrun) gets it, and forwards it to its ranks."""
    if os.environ.pop(EXIT_WITH_PARENT_VAR, '') == '1':
        exit_with_parent()
