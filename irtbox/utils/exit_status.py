"""The exit status of a pre-empted training, shared by the training, torchrun's agent
(:mod:`irtbox.cli.launch`) and the sweeps; its own module, so that the launcher and the
sweep driver read it without importing torch."""

__all__ = ['PREEMPTED_EXIT_STATUS']

#: A training stopped by SIGTERM / SIGUSR1 after its checkpoint was saved: run the same
#: command again. ``EX_TEMPFAIL`` of ``sysexits.h`` ("temporary failure; try again later").
PREEMPTED_EXIT_STATUS = 75
