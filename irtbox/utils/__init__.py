from .checkpoint import (checkpoint_problem, load_state_dict_file, register_safe_globals,
                         safe_torch_load, state_digest, strip_prefixes)

__all__ = ['checkpoint_problem', 'load_state_dict_file', 'register_safe_globals',
           'safe_torch_load', 'state_digest', 'strip_prefixes']
