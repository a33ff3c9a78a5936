"""``python -m irtbox COMMAND ...``: the ``irtbox`` command (:mod:`irtbox.cli.main`)."""
from irtbox.cli.main import console

__all__ = []

if __name__ == '__main__':
    console()
