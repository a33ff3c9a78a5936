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
    """MMEngine's parse of a config irtbox ships (irtbox/configs, which no test changes) runs
    once per file and test process: ``Config.fromfile`` of a shipped config, and of each base
    it names (MMEngine parses a config's bases again for every config: ~1,700 parses for ~220
    configs). The tests that load every shipped config (seconds each time) share them; each
    call still gets its own deep copy (``fromfile``: with the ``filename`` it was called with).
    Other files are parsed as they are."""
    from mmengine.config import Config
    fromfile, file2dict = Config.fromfile, Config._file2dict

    def once(parse, filename, args, kwargs):
        path = osp.realpath(str(filename))
        if not path.startswith(SHIPPED):
            return parse(filename, *args, **kwargs)
        key = (parse.__name__, str(filename), path, os.stat(path).st_mtime_ns, args,
               tuple(sorted(kwargs.items())))
        if key not in _parsed:
            _parsed[key] = parse(filename, *args, **kwargs)
        return copy.deepcopy(_parsed[key])

    monkeypatch.setattr(Config, 'fromfile', staticmethod(
        lambda filename, *args, **kwargs: once(fromfile, filename, args, kwargs)))
    monkeypatch.setattr(Config, '_file2dict', staticmethod(
        lambda filename, *args, **kwargs: once(file2dict, filename, args, kwargs)))
