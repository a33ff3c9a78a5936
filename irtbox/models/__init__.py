from . import backbones, heads, losses, necks, retrievers  # noqa: F401  (registration)
