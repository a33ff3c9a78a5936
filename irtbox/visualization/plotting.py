"""matplotlib for the figure tools: headless (Agg), with a clear message when it is missing."""

__all__ = ['pyplot']


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed)."""
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError('the figures need matplotlib: pip install matplotlib (or '
                          "pip install -e '.[optional]'); tools/sweep.py runs without "
                          'figures with --no-plot') from error
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt
