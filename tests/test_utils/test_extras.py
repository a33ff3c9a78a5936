"""A missing pip extra is one line naming the install command, before any work."""
import importlib.util

import pytest

from irtbox.utils.extras import MissingExtraError, require_extra


def test_present_modules_pass_and_missing_ones_are_named():
    require_extra(('numpy', 'json'), 'serve', 'x')
    with pytest.raises(MissingExtraError, match=r'^tools/search.py serve needs '
                       r'no_such_module_a, no_such_module_b, which are not installed: '
                       r'pip install "irtbox\[serve\]"$'):
        require_extra(('numpy', 'no_such_module_a', 'no_such_module_b'), 'serve',
                      'tools/search.py serve')


def hide(monkeypatch, *names):
    """importlib.util.find_spec as on a machine without ``names``."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec',
                        lambda name, *args: None if name in names else find_spec(name, *args))


def test_serve_without_its_extra_stops_before_loading(monkeypatch, tmp_path):
    from irtbox.cli import search
    hide(monkeypatch, 'uvicorn')
    # The index folder does not exist: the extra is checked before anything is read.
    with pytest.raises(SystemExit, match=r'^search serve: tools/search.py serve needs uvicorn, '
                       r'which is not installed: pip install "irtbox\[serve\]"$'):
        search.main(['serve', str(tmp_path / 'no_index')])


def test_onnx_export_without_its_extra_stops_before_building(monkeypatch, tmp_path):
    from irtbox.cli import export
    hide(monkeypatch, 'onnxruntime')
    with pytest.raises(SystemExit, match=r'^export: .* needs onnxruntime, which is not '
                       r'installed: pip install "irtbox\[deploy\]"$'):
        export.main([str(tmp_path / 'no_config.py'), 'none', '--format', 'onnx',
                     '--out', str(tmp_path / 'm.onnx')])
