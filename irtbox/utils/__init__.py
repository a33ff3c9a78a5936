"""Helpers shared by the layers above, one module each (``irtbox.utils.checkpoint``,
``.config``, ``.dist``, ...). Nothing is imported here, so that a light helper module
(``.errors``, ``.exit_status``, ``.fileio``) does not import torch: a command's ``--help``
and a hand-over to torchrun start at once."""

__all__ = []
