from .hooks import *  # noqa: F401,F403
from .loops import MultiDatasetTestLoop, MultiDatasetValLoop  # noqa: F401
from .optim_wrappers import BF16AutocastOptimWrapper  # noqa: F401
from .runner import IrtboxRunner  # noqa: F401
