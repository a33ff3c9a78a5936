from .inference import (CheckpointMismatchError, init_model, load_model_weights,
                        without_pretrained_backbone)
from .model_zoo import (ModelNotReleasedError, UnknownModelError, ZooEntry, get_entry, get_model,
                        list_models)
from .publish import publish_checkpoint

__all__ = ['CheckpointMismatchError', 'ModelNotReleasedError', 'UnknownModelError', 'ZooEntry',
           'get_entry', 'get_model', 'init_model', 'list_models', 'load_model_weights',
           'publish_checkpoint', 'without_pretrained_backbone']
