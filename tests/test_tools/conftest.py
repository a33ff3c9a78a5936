import os.path as osp
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')
sys.path.insert(0, osp.join(ROOT, 'tools'))


@pytest.fixture
def in_root(monkeypatch):
    """Run in the repository root, where the configs' relative data paths point."""
    monkeypatch.chdir(ROOT)
    return ROOT
