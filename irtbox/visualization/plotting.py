"""matplotlib for the figure tools: headless (Agg), with a clear message when it is missing."""

from irtbox.utils.extras import require_extra

__all__ = ['pyplot']


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed)."""
    require_extra(['matplotlib'], 'plots', 'the figures')
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt
