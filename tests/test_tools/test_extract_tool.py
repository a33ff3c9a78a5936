"""tools/extract.py and tools/dist_extract.sh: one process and two CPU processes (gloo) give the
same features.npz; a resume redoes only the missing shards; corrupt images are listed."""
import os
import os.path as osp
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from irtbox.apis import extract_features, init_model
from tools import extract as extract_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')
pytest.importorskip('sklearn.datasets')


@pytest.fixture(scope='module')
def collection(tmp_path_factory):
    sys.path.insert(0, osp.join(ROOT, 'tools', 'dataset_converters'))
    from prepare_digits import prepare_digits
    root = tmp_path_factory.mktemp('collection')
    prepare_digits(str(root / 'digits'))
    folder = root / 'images'
    shutil.copytree(root / 'digits' / 'test' / '8', folder / 'eights')
    (folder / 'eights' / 'zero.jpg').write_bytes(b'')
    torch.manual_seed(0)
    checkpoint = str(root / 'model.pth')
    torch.save(init_model(CONFIG).state_dict(), checkpoint)
    return str(folder), checkpoint


def load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_one_process_equals_extract_features(collection, tmp_path):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    result = extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '50',
                                '--num-workers', '0'])
    saved = load(osp.join(out, 'features.npz'))
    direct = extract_features(init_model(CONFIG, checkpoint), folder, progress=False)
    assert saved['ids'].tolist() == direct.ids == result.ids
    np.testing.assert_array_equal(saved['embeddings'], direct.embeddings)
    assert saved['failed_ids'].tolist() == [osp.join(folder, 'eights', 'zero.jpg')]
    with pytest.raises(SystemExit, match='pass --resume'):
        extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '50'])
    with pytest.raises(SystemExit, match='other images, images_sha256'):
        extract_tool.main([CONFIG, checkpoint, osp.dirname(folder), out, '--shard-size', '50',
                           '--resume'])


def test_two_cpu_processes_equal_one(collection, tmp_path):
    folder, checkpoint = collection
    single = str(tmp_path / 'single')
    extract_tool.main([CONFIG, checkpoint, folder, single, '--shard-size', '40',
                       '--num-workers', '0'])
    double = str(tmp_path / 'double')
    env = dict(os.environ, OMP_NUM_THREADS='1', PORT=str(29600 + os.getpid() % 300))
    result = subprocess.run(['bash', osp.join(ROOT, 'tools', 'dist_extract.sh'), CONFIG,
                             checkpoint, folder, double, '2', '--shard-size', '40',
                             '--num-workers', '0'], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    a, b = load(osp.join(single, 'features.npz')), load(osp.join(double, 'features.npz'))
    assert a['ids'].tolist() == b['ids'].tolist()
    np.testing.assert_allclose(a['embeddings'], b['embeddings'], atol=1e-6)
    assert b['failed_ids'].tolist() == a['failed_ids'].tolist()
