from .hooks import *  # noqa: F401,F403
