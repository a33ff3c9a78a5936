"""The toolbox's Python API. Each name is imported from its module on first use (PEP 562):
importing one module of the package, such as the zoo's index (``irtbox.apis.model_zoo``, YAML
only), does not import the others and torch with them: ``irtbox list-models`` and a refusal
naming a zoo model start without torch (docs/benchmarks.md, "Command start-up")."""
import importlib

# name -> the module of this package that defines it
_MODULE = {
    **dict.fromkeys(('NonFiniteEmbeddingsError', 'extract_features', 'extract_folder',
                     'extract_sharded', 'list_images', 'merge_shards', 'prepare_shards'),
                    'extract'),
    **dict.fromkeys(('CheckpointMismatchError', 'get_model', 'init_model', 'load_model_weights',
                     'without_pretrained_backbone'), 'inference'),
    **dict.fromkeys(('ModelNotReleasedError', 'UnknownModelError', 'ZooEntry', 'get_entry',
                     'list_models'), 'model_zoo'),
    'publish_checkpoint': 'publish',
    **dict.fromkeys(('DEFAULT_RUNNER', 'build_runner', 'check_checkpoint', 'load_run_config'),
                    'run_setup'),
    'register_all_modules': 'setup_env',
    **dict.fromkeys(('EvaluationSetupError', 'result_sets', 'run_test', 'write_results'),
                    'tester'),
}

__all__ = sorted(_MODULE)


def __getattr__(name: str):
    if name not in _MODULE:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'.{_MODULE[name]}', __name__), name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
