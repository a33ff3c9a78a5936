from .extract import (ExtractionResult, extract_features, extract_to_shards, list_images,
                      merge_shards, prepare_shards, save_features)
from .inference import (CheckpointMismatchError, init_model, load_model_weights,
                        without_pretrained_backbone)
from .model_zoo import (ModelNotReleasedError, UnknownModelError, ZooEntry, get_entry, get_model,
                        list_models)
from .miniaturize import miniaturize
from .publish import publish_checkpoint
from .rehearse import RehearsalReport, rehearse
from .run_setup import DEFAULT_RUNNER, build_runner, check_checkpoint, load_run_config
from .setup_env import register_all_modules

__all__ = [
    'CheckpointMismatchError', 'DEFAULT_RUNNER', 'ExtractionResult', 'ModelNotReleasedError',
    'RehearsalReport', 'UnknownModelError', 'ZooEntry', 'build_runner', 'check_checkpoint',
    'extract_features', 'extract_to_shards', 'get_entry', 'get_model', 'init_model',
    'list_images', 'list_models', 'load_model_weights', 'load_run_config', 'merge_shards',
    'miniaturize', 'prepare_shards', 'publish_checkpoint', 'register_all_modules', 'rehearse',
    'save_features', 'without_pretrained_backbone'
]
