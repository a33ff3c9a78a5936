from .hooks import *  # noqa: F401,F403
from .loops import MultiDatasetTestLoop, MultiDatasetValLoop  # noqa: F401
