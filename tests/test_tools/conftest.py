import os.path as osp

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


@pytest.fixture
def in_root(monkeypatch):
    """Run in the repository root, where the configs' relative data paths point."""
    monkeypatch.chdir(ROOT)
    return ROOT
