from . import backbones, heads, losses, miners, necks, retrievers  # noqa: F401  (registration)
