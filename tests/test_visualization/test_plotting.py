import sys

import pytest

from irtbox.visualization.plotting import pyplot


def test_pyplot_is_headless():
    plt = pyplot()
    assert plt.get_backend().lower() == 'agg'


def test_missing_matplotlib_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)
    with pytest.raises(ImportError, match=r'the figures .*needs matplotlib.*pip install "irtbox\[plots\]"'):
        pyplot()
