"""matplotlib for the figure tools: headless (Agg), with a clear message when it is missing."""

from irtbox.utils.extras import require_extra
from irtbox.utils.fileio import atomic_write

__all__ = ['pyplot', 'save_figure']


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed)."""
    require_extra(['matplotlib'], 'plots', 'the figures')
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path: str, dpi: int = 120) -> str:
    """Lay ``fig`` out tightly, write it to ``path`` atomically (the format from the suffix)
    and close it; returns ``path``."""
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=dpi))
    pyplot().close(fig)
    return path
