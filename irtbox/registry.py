"""irtbox registries: children of MMEngine's root registries, scope 'irtbox'.

``default_scope='irtbox'`` in the configs makes these the registries that MMEngine's
``Runner`` looks names up in; names not found here fall back to MMEngine's parent
registries (e.g. ``ImgDataPreprocessor``, ``AdamW``). Register your own parts into them
(``@MODELS.register_module()``) and name them in a config, with ``custom_imports`` when
they live outside irtbox.

``locations`` names the package that registers a registry's parts (imported on demand). The
registries without (nothing of ours: MMEngine's or torch's parts only) are kept: without an
'irtbox' node in a tree MMEngine warns on every run ("Failed to search registry with scope irtbox")."""
from mmengine.registry import DATA_SAMPLERS as MMENGINE_DATA_SAMPLERS
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import EVALUATOR as MMENGINE_EVALUATOR
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import LOG_PROCESSORS as MMENGINE_LOG_PROCESSORS
from mmengine.registry import LOOPS as MMENGINE_LOOPS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import \
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import OPTIMIZERS as MMENGINE_OPTIMIZERS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import RUNNERS as MMENGINE_RUNNERS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import VISBACKENDS as MMENGINE_VISBACKENDS
from mmengine.registry import VISUALIZERS as MMENGINE_VISUALIZERS
from mmengine import registry as mmengine_registry
from mmengine.registry import Registry

__all__ = ['RUNNERS', 'LOOPS', 'HOOKS', 'LOG_PROCESSORS', 'OPTIMIZERS', 'OPTIM_WRAPPERS',
           'OPTIM_WRAPPER_CONSTRUCTORS', 'PARAM_SCHEDULERS', 'DATASETS', 'DATA_SAMPLERS',
           'TRANSFORMS', 'MODELS', 'MODEL_WRAPPERS', 'METRICS', 'SEARCHERS', 'EVALUATOR',
           'VISUALIZERS', 'VISBACKENDS', 'type_name', 'unregistered_types']


def type_name(node) -> str:
    """The class name a config's ``type`` gives: ``node`` is a config dict (its ``type``), a
    registered name, possibly scoped (``'irtbox.SOPDataset'``), or a class; '' for none."""
    value = node.get('type') if isinstance(node, dict) else node
    return value.rsplit('.', 1)[-1] if isinstance(value, str) else getattr(value, '__name__', '')

# Runners: IrtboxRunner (build_runner builds cfg.runner_type, default it).
RUNNERS = Registry('runner', parent=MMENGINE_RUNNERS, locations=['irtbox.engine'])
# Loops: validation and test over several datasets at once.
LOOPS = Registry('loop', parent=MMENGINE_LOOPS, locations=['irtbox.engine'])
# Hooks: PCA / whitening fitting, tuple mining, early stopping, non-finite-loss stop, ...
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, locations=['irtbox.engine'])
LOG_PROCESSORS = Registry('log processor', parent=MMENGINE_LOG_PROCESSORS)

OPTIMIZERS = Registry('optimizer', parent=MMENGINE_OPTIMIZERS)
# Optimizer wrappers: bf16 autocast on the GPUs that support it.
OPTIM_WRAPPERS = Registry(
    'optim_wrapper', parent=MMENGINE_OPTIM_WRAPPERS, locations=['irtbox.engine'])
OPTIM_WRAPPER_CONSTRUCTORS = Registry(
    'optimizer wrapper constructor', parent=MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS)
PARAM_SCHEDULERS = Registry('parameter scheduler', parent=MMENGINE_PARAM_SCHEDULERS)

# Datasets: one file each under irtbox/datasets/, plus wrappers (benchmark splits, ...).
DATASETS = Registry('dataset', parent=MMENGINE_DATASETS, locations=['irtbox.datasets'])
# Samplers that compose batches: M images per class, group sizes, ...
DATA_SAMPLERS = Registry(
    'data sampler', parent=MMENGINE_DATA_SAMPLERS, locations=['irtbox.datasets.samplers'])
# Transforms: image loading, resizing, cropping, packing into data samples.
TRANSFORMS = Registry(
    'transform', parent=MMENGINE_TRANSFORMS, locations=['irtbox.datasets.transforms'])

# Models (one registry, as in MMEngine): retrievers, backbones, heads, losses, miners, ...
MODELS = Registry('model', parent=MMENGINE_MODELS, locations=['irtbox.models'])
MODEL_WRAPPERS = Registry('model_wrapper', parent=MMENGINE_MODEL_WRAPPERS)

# Metrics: retrieval metrics, wrapping the pure functions of irtbox.evaluation.functional.
METRICS = Registry('metric', parent=MMENGINE_METRICS, locations=['irtbox.evaluation'])
# Searchers: the nearest-neighbour search a metric runs (exact torch, faiss), built from its
# ``search=dict(type=...)``. MMEngine has no such tree, so this one is a root of its own.
SEARCHERS = Registry('searcher', scope='irtbox', locations=['irtbox.evaluation.neighbours'])
EVALUATOR = Registry('evaluator', parent=MMENGINE_EVALUATOR)

VISUALIZERS = Registry('visualizer', parent=MMENGINE_VISUALIZERS)
VISBACKENDS = Registry('vis_backend', parent=MMENGINE_VISBACKENDS)


def unregistered_types(node, key: str = '') -> list:
    """The keys (dotted, ``model.neck.0``) of the dicts in ``node`` whose ``type`` is not the
    name of a part registered in irtbox's registries or MMEngine's (optionally scoped
    ``irtbox.`` / ``mmengine.``): a config read as data names only those, since MMEngine
    resolves any other string as a dotted import path (``'os.system'``) and calls it."""
    names = set()
    for registry in [*globals().values(), *vars(mmengine_registry).values()]:
        if isinstance(registry, Registry):
            registry.import_from_location()
            names.update(registry.module_dict)
    found = []

    def walk(value, where):
        if isinstance(value, dict):
            kind = value.get('type')
            scope, _, name = kind.rpartition('.') if isinstance(kind, str) else ('', '', None)
            if 'type' in value and (scope not in ('', 'irtbox', 'mmengine') or name not in names):
                found.append(where or '(top level)')
            items = value.items()
        elif isinstance(value, (list, tuple)):
            items = enumerate(value)
        else:
            return
        for k, v in items:
            walk(v, f'{where}.{k}' if where else str(k))
    walk(node, key)
    return found
