"""tools/extract.py and tools/dist_extract.sh: one process and two CPU processes (gloo) give the
same features.npz; a resume redoes only the missing shards and refuses another job; corrupt
images are listed."""
import logging
import os
import os.path as osp
import shutil
import subprocess

import numpy as np
import pytest
import torch

import irtbox.apis.extract as extract_module
from irtbox.apis import extract_features, init_model, list_images, merge_shards
from irtbox.cli import extract as extract_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'quickstart', 'irt-r_vit-tiny_1xb64-500_digits.py')


@pytest.fixture(scope='module')
def collection(tmp_path_factory, digits_root):
    """174 digit PNGs and an empty (unreadable) JPEG; a random-weight checkpoint."""
    root = tmp_path_factory.mktemp('collection')
    folder = root / 'images'
    shutil.copytree(digits_root / 'test' / '8', folder / 'eights')
    (folder / 'eights' / 'zero.jpg').write_bytes(b'')
    torch.manual_seed(0)
    checkpoint = str(root / 'model.pth')
    torch.save(init_model(CONFIG).state_dict(), checkpoint)
    return str(folder), checkpoint


def load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def test_one_process_equals_extract_features(collection, tmp_path, monkeypatch):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    warnings = []
    monkeypatch.setattr(extract_module, 'print_log',
                        lambda msg, logger=None, level=logging.INFO: warnings.append(msg))
    result = extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '50',
                                '--num-workers', '0'])
    saved = load(osp.join(out, 'features.npz'))
    zero = osp.join(folder, 'eights', 'zero.jpg')
    assert len(warnings) == 1 and '1 of 175 images could not be read' in warnings[0]
    assert zero in warnings[0]
    assert saved['failed_ids'].tolist() == [zero] and saved['failed_reasons'][0]
    direct = extract_features(init_model(CONFIG, checkpoint), folder, progress=False)
    assert saved['ids'].tolist() == direct.ids == result.ids and len(direct.ids) == 174
    np.testing.assert_array_equal(saved['embeddings'], direct.embeddings)
    assert sorted(os.listdir(osp.join(out, 'shards'))) == [f'shard_{i:06d}.npz' for i in range(4)]


def test_resume(collection, tmp_path, request):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    args = [CONFIG, checkpoint, folder, out, '--shard-size', '50', '--num-workers', '0']
    extract_tool.main(args)
    before = load(osp.join(out, 'features.npz'))
    shards = [osp.join(out, 'shards', f'shard_{i:06d}.npz') for i in range(4)]
    mtimes = [os.stat(s).st_mtime_ns for s in shards]
    os.remove(shards[1])
    with pytest.raises(FileNotFoundError, match=r'1 of 4 shards are missing \(.*shard_000001'):
        merge_shards(out)
    with pytest.raises(SystemExit, match='pass --resume'):
        extract_tool.main(args)

    embedded = request.getfixturevalue('embedded_items')
    extract_tool.main(args + ['--resume'])
    assert embedded == list_images(folder)[50:100]  # only the deleted shard
    assert [os.stat(s).st_mtime_ns for i, s in enumerate(shards) if i != 1] == mtimes[:1] + \
        mtimes[2:]
    after = load(osp.join(out, 'features.npz'))
    assert after['ids'].tolist() == before['ids'].tolist()
    np.testing.assert_array_equal(after['embeddings'], before['embeddings'])


def test_resume_of_another_job_is_refused(collection, tmp_path):
    folder, checkpoint = collection
    out = str(tmp_path / 'out')
    extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '100', '--num-workers',
                       '0'])
    more = tmp_path / 'more'
    shutil.copytree(folder, more)
    shutil.copy(osp.join(folder, 'eights', 'zero.jpg'), more / 'one_more.png')
    with pytest.raises(SystemExit, match=r'other images, images_sha256 \(images: 175 then, 176'):
        extract_tool.main([CONFIG, checkpoint, str(more), out, '--shard-size', '100', '--resume'])
    with pytest.raises(SystemExit, match='other shard_size, shards'):
        extract_tool.main([CONFIG, checkpoint, folder, out, '--shard-size', '50', '--resume'])
    other = str(tmp_path / 'other.pth')
    torch.manual_seed(1)
    torch.save(init_model(CONFIG).state_dict(), other)
    with pytest.raises(SystemExit, match='other model .*model: weights_sha256'):
        extract_tool.main([CONFIG, other, folder, out, '--shard-size', '100', '--resume'])


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
    assert 'rank 0 computed 3 shard(s)' in result.stdout + result.stderr  # of 5: 0, 2, 4
    a, b = load(osp.join(single, 'features.npz')), load(osp.join(double, 'features.npz'))
    assert a['ids'].tolist() == b['ids'].tolist()
    np.testing.assert_allclose(a['embeddings'], b['embeddings'], atol=1e-6)
    assert b['failed_ids'].tolist() == a['failed_ids'].tolist()
