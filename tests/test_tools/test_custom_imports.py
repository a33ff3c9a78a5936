"""A module outside the package, pulled in by custom_imports, used by tools/train.py (in a
process of its own: the module registers a part for the rest of its process)."""
import os
import os.path as osp
import subprocess
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TINY_CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


CONFIG = osp.join(ROOT, 'tests', 'data', 'custom_module', 'my_config.py')


def test_train_with_custom_module(tmp_path):
    # The module's folder in front of what the caller's PYTHONPATH already holds.
    paths = [osp.join(ROOT, 'tests', 'data', 'custom_module'), os.environ.get('PYTHONPATH', '')]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', CONFIG, '--work-dir', str(tmp_path),
         '--cfg-options', 'train_cfg.max_iters=2', 'train_cfg.val_interval=2'],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert 'TopKPool' in proc.stdout + proc.stderr  # the model printed in the log uses it
    assert osp.isfile(osp.join(str(tmp_path), 'iter_2.pth'))


def test_missing_custom_module_is_named(tmp_path, in_root):
    from irtbox.cli import train as train_tool
    with pytest.raises(ImportError, match='my_pool'):  # the script exits non-zero with it
        train_tool.main([CONFIG, '--work-dir', str(tmp_path)])
