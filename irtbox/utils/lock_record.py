"""The record a lock's holder leaves beside its kernel lock (``filelock``): who holds it, so
that a refused contender can name the holder (a work dir, an index folder)."""
import datetime
import os
import socket
from typing import Optional

from .fileio import read_json

__all__ = ['lock_record', 'read_lock_record']


def lock_record(**extra) -> dict:
    """This process's record: ``pid``, ``host``, ``started`` and the ``extra`` fields."""
    return dict(pid=os.getpid(), host=socket.gethostname(),
                started=datetime.datetime.now().isoformat(timespec='seconds'), **extra)


def read_lock_record(path: str) -> Optional[dict]:
    """The record at ``path``; None when there is none, ``{}`` when it is unreadable (an
    unknown holder)."""
    try:
        record = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
