"""Fixtures of the tests of irtbox.ops."""
import copy
import os
import os.path as osp

import pytest

from irtbox.utils.config import CONFIGS_DIR

SHIPPED = osp.realpath(CONFIGS_DIR) + os.sep  # a checkout's configs/ links there
_parsed = {}  # (the call, the file's mtime) -> Config, for this test process


@pytest.fixture
def shipped_configs_parsed_once(monkeypatch):
    """``Config.fromfile`` of a config irtbox ships (irtbox/configs, which no test changes)
    parses each file once per test process: the tests that load every shipped config (~220,
    seconds each time) share the parse; each call still gets its own deep copy, with the
    ``filename`` it was called with. Other files are loaded as they are."""
    from mmengine.config import Config
    fromfile = Config.fromfile

    def parsed_once(filename, *args, **kwargs):
        path = osp.realpath(str(filename))
        if not path.startswith(SHIPPED):
            return fromfile(filename, *args, **kwargs)
        key = (str(filename), path, os.stat(path).st_mtime_ns, args,
               tuple(sorted(kwargs.items())))
        if key not in _parsed:
            _parsed[key] = fromfile(filename, *args, **kwargs)
        return copy.deepcopy(_parsed[key])

    monkeypatch.setattr(Config, 'fromfile', staticmethod(parsed_once))
