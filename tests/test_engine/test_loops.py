"""MultiDatasetTestLoop: one test run over several datasets, each with its metrics."""
import os.path as osp

import numpy as np
import pytest

from irtbox.cli import test as test_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt_two_tests.py')
SINGLE = osp.join(ROOT, 'tests', 'data', 'configs', 'tiny_irt.py')


@pytest.mark.slow
def test_two_test_sets_in_one_run(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = str(tmp_path / 'r.npz')
    metrics = test_tool.main([CONFIG, '--work-dir', str(tmp_path), '--out', out])
    assert {'sop/recall@1', 'sop/recall@2', 'cub/recall@1'} <= set(metrics)
    single = test_tool.main([SINGLE, '--work-dir', str(tmp_path / 's')])
    assert metrics['sop/recall@1'] == pytest.approx(single['recall@1'])
    saved = np.load(out)
    assert '0/embeddings' in saved and '1/embeddings' in saved


@pytest.mark.slow
def test_mismatched_lists_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ValueError, match='lists of the same length'):
        test_tool.main([CONFIG, '--work-dir', str(tmp_path),
                        '--cfg-options', 'test_evaluator=[]'])
