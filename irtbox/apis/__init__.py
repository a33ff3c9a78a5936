from .extract import (NonFiniteEmbeddingsError, extract_features, extract_folder,
                      extract_sharded, list_images, merge_shards, prepare_shards)
from .inference import (CheckpointMismatchError, get_model, init_model, load_model_weights,
                        without_pretrained_backbone)
from .model_zoo import ModelNotReleasedError, UnknownModelError, ZooEntry, get_entry, list_models
from .publish import publish_checkpoint
from .run_setup import DEFAULT_RUNNER, build_runner, check_checkpoint, load_run_config
from .setup_env import register_all_modules
from .tester import EvaluationSetupError, result_sets, run_test, write_results

__all__ = [
    'CheckpointMismatchError', 'DEFAULT_RUNNER', 'EvaluationSetupError', 'ModelNotReleasedError',
    'NonFiniteEmbeddingsError', 'UnknownModelError', 'ZooEntry',
    'build_runner', 'check_checkpoint', 'extract_features', 'extract_folder', 'extract_sharded',
    'get_entry', 'get_model', 'init_model', 'list_images', 'list_models',
    'load_model_weights', 'load_run_config', 'merge_shards', 'prepare_shards',
    'publish_checkpoint', 'register_all_modules', 'result_sets', 'run_test',
    'without_pretrained_backbone', 'write_results'
]
