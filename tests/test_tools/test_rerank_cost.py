"""tools/benchmarks/rerank_cost.py at a tiny size: the script keeps working (no timing is checked;
the real run is by hand, docs/benchmarks.md)."""
import os
import os.path as osp
import subprocess
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


@pytest.mark.slow
def test_every_step_reports(tmp_path):
    out = subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'benchmarks', 'rerank_cost.py'),
                          '--db-size', '300', '--dim', '16', '--queries', '4',
                          '--data-dir', str(tmp_path)], check=True, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    for step in ('search', 'graph', 'kreciprocal', 'diffusion', 'superglobal'):
        assert f'| {step} |' in out
    assert 'graph recall@50 against exact search (100 rows): 1.000' in out  # the exact graph
