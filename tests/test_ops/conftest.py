"""Fixtures of the tests of irtbox.ops."""
import pytest

from irtbox.utils.mmengine_compat import configs_parsed_once

_parsed = {}  # MMEngine's parses of config files, for this test process


@pytest.fixture
def shipped_configs_parsed_once():
    """Each config file parsed once per test process (:func:`configs_parsed_once`): the tests
    that load every shipped config (seconds each time) share the parses."""
    with configs_parsed_once(_parsed):
        yield
