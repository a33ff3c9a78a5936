"""tools/test.py --out results.json: the metrics only, no embeddings."""
import json
import os

import pytest

from irtbox.cli import test as test_tool

TINY_CONFIG = 'tests/data/configs/tiny_irt.py'


@pytest.mark.slow
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


def test_unwritable_out_fails_at_once(tmp_path, in_root):
    """--out in a folder that cannot be made: the command stops before the test runs (no
    run folder, no log) and names the path."""
    (tmp_path / 'file.txt').write_text('not a folder')
    work_dir = tmp_path / 'work'
    with pytest.raises(SystemExit, match=r'--out .*file.txt/r.npz: .*not a folder'):
        test_tool.main([TINY_CONFIG, '--work-dir', str(work_dir),
                        '--out', str(tmp_path / 'file.txt' / 'r.npz')])
    with pytest.raises(SystemExit, match=r'--show-dir .*file.txt: exists and is not a folder'):
        test_tool.main([TINY_CONFIG, '--work-dir', str(work_dir),
                        '--show-dir', str(tmp_path / 'file.txt')])
    assert not work_dir.exists()


def test_out_must_be_npz_or_json(capsys):
    with pytest.raises(SystemExit):
        test_tool.parse_args([TINY_CONFIG, '--out', 'results.csv'])
    assert '--out must name a .npz or .json file, got results.csv' in capsys.readouterr().err
