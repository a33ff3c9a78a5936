"""The registries: each a scope-'irtbox' child of MMEngine's (``SEARCHERS``, of a kind MMEngine
lacks, a root of its own), and each ``locations`` entry really registers something into its
registry (an empty one is kept only as the scope's node, so that MMEngine's Runner does not
warn, and then names no location)."""
import mmengine.registry as mmengine_registry
import pytest
from mmengine.registry import Registry

import irtbox.registry as irtbox_registry

REGISTRIES = {name: value for name, value in vars(irtbox_registry).items()
              if isinstance(value, Registry) and not name.startswith('MMENGINE_')}
# Registries of kinds MMEngine has no tree for.
OWN = {'SEARCHERS'}


def test_every_mmengine_tree_the_runner_builds_from_has_our_node():
    assert set(REGISTRIES) - OWN == {
        'RUNNERS', 'LOOPS', 'HOOKS', 'LOG_PROCESSORS', 'OPTIMIZERS', 'OPTIM_WRAPPERS',
        'OPTIM_WRAPPER_CONSTRUCTORS', 'PARAM_SCHEDULERS', 'DATASETS', 'DATA_SAMPLERS',
        'TRANSFORMS', 'MODELS', 'MODEL_WRAPPERS', 'METRICS', 'EVALUATOR', 'VISUALIZERS',
        'VISBACKENDS'}


@pytest.mark.parametrize('name', sorted(REGISTRIES))
def test_child_of_mmengine_with_real_locations(name):
    registry = REGISTRIES[name]
    assert registry.scope == 'irtbox'
    assert registry.parent is (None if name in OWN else getattr(mmengine_registry, name))
    registry.import_from_location()
    assert bool(registry._locations) == bool(registry.module_dict), (
        f'{name}: locations {registry._locations} but {len(registry.module_dict)} modules')
