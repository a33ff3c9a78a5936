from .checkpoint import (checkpoint_problem, load_state_dict_file, register_safe_globals,
                         safe_torch_load, strip_prefixes)
from .setup_env import register_all_modules

__all__ = ['checkpoint_problem', 'load_state_dict_file', 'register_all_modules',
           'register_safe_globals', 'safe_torch_load', 'strip_prefixes']
