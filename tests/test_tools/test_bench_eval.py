"""tools/benchmarks/bench_eval.py at a tiny size: the script keeps working (no timing is
checked; the real run is by hand, docs/benchmarks.md)."""
import json
import os.path as osp
import subprocess
import sys

import pytest

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(ROOT, 'tools', 'benchmarks', 'bench_eval.py')


def run(tmp_path, *args):
    out = tmp_path / 'bench.json'
    md = tmp_path / 'bench.md'
    subprocess.run([sys.executable, SCRIPT, *args, '--json', str(out), '--md', str(md)],
                   check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.read_text()), md.read_text()


@pytest.mark.slow
def test_retrieval_contenders_agree(tmp_path):
    pytest.importorskip('faiss')
    result, table = run(tmp_path, '--n', '400', '--dim', '16', '--ks', '1', '10',
                        '--index', 'IVF4,Flat', '--nprobe', '4', '--contenders', 'faiss_k1001',
                        'irtbox_torch', 'irtbox_faiss', 'irtbox_approx', 'pml')
    rows = {r['contender']: r for r in result['rows']}
    assert {'faiss_k1001', 'irtbox_torch', 'irtbox_faiss'} <= set(rows)
    assert rows['irtbox_torch']['metrics'] == pytest.approx(rows['irtbox_faiss']['metrics'])
    approx = dict(rows['irtbox_approx']['metrics'])  # every list visited: exact
    assert approx.pop('search_recall@10') == pytest.approx(1.0)
    assert approx == pytest.approx(rows['irtbox_torch']['metrics'])
    assert set(rows['irtbox_torch']['metrics']) == {'recall@1', 'recall@10', 'map@r',
                                                    'r_precision', 'precision@1'}
    if 'pml' in rows:  # installed: the same three numbers
        for key, value in rows['pml']['metrics'].items():
            assert value == pytest.approx(rows['irtbox_torch']['metrics'][key], abs=1e-6)
    assert all(r['seconds'] > 0 and r['extra_peak_mb'] >= 0 for r in rows.values())
    assert '| irtbox_torch | 400 |' in table and '1.00x' in table
    assert '| irtbox_approx | 400 |' in table


@pytest.mark.slow
def test_landmark_contenders_agree(tmp_path):
    result, table = run(tmp_path, '--landmarks', '--n', '3000', '--queries', '4', '--dim', '8')
    rows = {r['contender']: r for r in result['rows']}
    assert set(rows) == {'numpy_argsort', 'rank_database', 'revisited_metrics'}
    assert rows['revisited_metrics']['metrics'] == rows['rank_database']['metrics']
    assert '| revisited_metrics | 3000 |' in table


@pytest.mark.slow
def test_train_input_benchmark_runs(tmp_path):
    pytest.importorskip('cv2')
    out = tmp_path / 'train_input.json'
    subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'benchmarks', 'bench_train_input.py'),
                    '--images', '20', '--batch', '8', '--size', '64', '48', '--json', str(out)],
                   check=True, capture_output=True, text=True, timeout=600)
    rows = {r['contender']: r for r in json.loads(out.read_text())['rows']}
    assert set(rows) == {'bare', 'irtbox'}
    assert all(r['images'] == 20 and r['seconds'] > 0 for r in rows.values())


@pytest.mark.slow
def test_train_loop_benchmark_runs(tmp_path):
    out = tmp_path / 'train_loop.json'
    subprocess.run([sys.executable, osp.join(ROOT, 'tools', 'benchmarks', 'bench_train_loop.py'),
                    '--model', 'vit_tiny_patch16_224', '--size', '32', '--batch', '8',
                    '--iters', '2', '--warmup', '1', '--images', '8', '--json', str(out)],
                   check=True, capture_output=True, text=True, timeout=600)
    rows = {r['contender']: r for r in json.loads(out.read_text())['rows']}
    assert set(rows) == {'bare', 'irtbox'}
    assert all(r['iters'] == 1 and r['per_iter'] > 0 for r in rows.values())
