"""What a run shows on the terminal and what only its log file keeps. Before its first
iteration MMEngine logs the environment, the whole config and the hooks' order (~290 lines);
they stay in the log file, and the terminal shows the run's short header and its progress.
``IRTBOX_VERBOSE=1`` shows them on the terminal too."""
import logging
import os

__all__ = ['VERBOSE_VAR', 'LogFileOnly', 'keep_dumps_off_terminal']

#: Set (1, true, yes, on): the environment, config and hooks dump on the terminal too.
VERBOSE_VAR = 'IRTBOX_VERBOSE'
# How MMEngine's Runner starts the records of its dump.
_DUMPS = ('\n' + '-' * 60 + '\nSystem environment:', 'Config:\n',
          'Hooks will be executed in the following order:')


class LogFileOnly(logging.Filter):
    """Drops the records of MMEngine's start-up dump (for the terminal's handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_DUMPS)


def keep_dumps_off_terminal(logger: logging.Logger) -> None:
    """Keep MMEngine's start-up dump off ``logger``'s terminal handlers (its log file keeps
    it), unless :data:`VERBOSE_VAR` is set."""
    if os.environ.get(VERBOSE_VAR, '').strip().lower() in ('1', 'true', 'yes', 'on'):
        return
    for handler in logger.handlers:
        if type(handler) is logging.StreamHandler and not any(
                isinstance(f, LogFileOnly) for f in handler.filters):
            handler.addFilter(LogFileOnly())
