"""Registration of irtbox's modules and default scope, for code that builds modules without a
runner."""
import datetime
import warnings

from mmengine import DefaultScope

# Imported for what they register.
import irtbox.datasets  # noqa: F401
import irtbox.engine  # noqa: F401
import irtbox.evaluation  # noqa: F401
import irtbox.models  # noqa: F401
from irtbox.utils.checkpoint import register_safe_globals

__all__ = ['register_all_modules']


def register_all_modules(init_default_scope: bool = True) -> None:
    """Register irtbox's modules (imported above) and the checkpoint classes ``torch.load`` may
    unpickle, and set the default scope. Runners built from irtbox configs need no call to this (the
    registries locate their modules lazily); it is for scripts that build modules directly."""
    register_safe_globals()
    if not init_default_scope:
        return
    current = DefaultScope.get_current_instance()
    if current is None or not DefaultScope.check_instance_created('irtbox'):
        DefaultScope.get_instance('irtbox', scope_name='irtbox')
    elif current.scope_name != 'irtbox':
        warnings.warn(f'The current default scope "{current.scope_name}" is not "irtbox"; '
                      'a new one named "irtbox-<time>" is created.')
        name = f'irtbox-{datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")}'
        DefaultScope.get_instance(name, scope_name='irtbox')
