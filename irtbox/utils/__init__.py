"""Helpers shared by the layers above. The checkpoint helpers below are imported from
:mod:`irtbox.utils.checkpoint` on first use, so that importing a light helper module
(``irtbox.utils.config``, ``.extras``, ``.fileio``) does not import torch: a command that only
hands over to torchrun starts at once."""
import importlib

__all__ = ['checkpoint_problem', 'load_state_dict_file', 'register_safe_globals',
           'safe_torch_load', 'state_digest', 'strip_prefixes']


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module('.checkpoint', __name__), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
