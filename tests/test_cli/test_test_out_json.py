"""tools/test.py --out results.json: the metrics only, no embeddings."""
import json
import os

import numpy as np
import pytest

from irtbox.cli import test as test_tool

TINY_CONFIG = 'tests/data/configs/tiny_irt.py'


def test_out_json_writes_metrics_only(tmp_path, in_root):
    out_dir = tmp_path / 'results'
    metrics = test_tool.main([TINY_CONFIG, '--work-dir', str(tmp_path / 'work'),
                              '--out', str(out_dir / 'test_results.json')])
    assert os.listdir(out_dir) == ['test_results.json']
    with open(out_dir / 'test_results.json') as f:
        written = json.load(f)
    assert set(written) == set(metrics) and 'recall@1' in written
    for name, value in metrics.items():
        assert written[name] == pytest.approx(float(value))


def test_write_outputs_json_matches_npz_sidecar(tmp_path):
    metrics = {'recall@1': np.float32(0.75), 'map@r': 0.5}
    outputs = {'embeddings': np.eye(3, dtype=np.float32), 'labels': np.arange(3)}
    test_tool.write_outputs(str(tmp_path / 'only.json'), metrics, outputs)
    test_tool.write_outputs(str(tmp_path / 'full.npz'), metrics, outputs)
    assert sorted(os.listdir(tmp_path)) == ['full.json', 'full.npz', 'only.json']
    with open(tmp_path / 'only.json') as f, open(tmp_path / 'full.json') as g:
        only, full = json.load(f), json.load(g)
    assert only == full == {'recall@1': 0.75, 'map@r': 0.5}
    arrays = np.load(tmp_path / 'full.npz')
    np.testing.assert_array_equal(arrays['embeddings'], outputs['embeddings'])
    assert float(arrays['metrics/recall@1']) == 0.75


def test_out_must_be_npz_or_json(capsys):
    with pytest.raises(SystemExit):
        test_tool.parse_args([TINY_CONFIG, '--out', 'results.csv'])
    assert '--out must name a .npz or .json file, got results.csv' in capsys.readouterr().err
