"""Fixtures of the fault-injection tests."""
import pytest

from tests.test_reliability.reliability_helpers import ROOT


@pytest.fixture
def in_root(monkeypatch):
    """Run in the repository root, where the configs' relative data paths point."""
    monkeypatch.chdir(ROOT)
    return ROOT
